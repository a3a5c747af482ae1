"""共用模块 docstring 里的小例子必须是真的。"""
import doctest
import importlib

import pytest


@pytest.mark.parametrize("name", ["kv_store.tiers", "kv_store.eviction", "kv_store.replay", "kv_store.prefix_match",
                                  "kv_store.traces", "kv_store.belady", "kv_store.cluster", "kv_store.radix_tree",
                                  "lab_common.console", "lab_common.say", "lab_common.workers", "paged_kv"])
def test_module_doctests(name):
    assert doctest.testmod(importlib.import_module(name)).failed == 0


def test_settings_and_edit_helpers_doctests():
    import test_student_edits
    from lab_common import settings
    assert doctest.testmod(settings).failed == 0
    assert doctest.testmod(test_student_edits).failed == 0
