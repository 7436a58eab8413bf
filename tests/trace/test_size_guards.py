"""A compile's own guards on sizes, as torch writes them in its guard tree: read as
arithmetic with one size given (a bound torch's own code keeps, #76's eighteenth look), and
told apart from 32-bit indexing's bound, which splits no size near those seen."""

from __future__ import annotations

from compilediag.trace.formats import size_guards, size_holds, sizes_in_words, splits_near

# texts of torch 2.11 (CUDA, Inductor) and 2.13 (CPU, Inductor) guard trees
CONV_BOUND = (
    "3 <= L['x'].size()[0] <= 15  # (_inductor/codegen/cpp.py:2397 in need_use_acc_helper) "
    "and return F.conv2d(  # nn/modules/conv.py:560 in _conv_forward"
)
INDEXING = "8192*L['x'].size()[1] <= 2147483647  # (_inductor/codegen/simd.py:1877 in can_use_32bit_indexing)"
PRODUCT = "8*L['x'].size()[0]*L['x'].size()[2] <= 4096  # (_inductor/codegen/cpp.py:2397 in need_use_acc_helper)"


def test_a_bound_reads_with_one_size_and_not_with_another_named() -> None:
    assert size_holds(CONV_BOUND, "x", 0, 2) is False
    assert size_holds(CONV_BOUND, "x", 0, 4) is True
    assert size_holds(CONV_BOUND, "x", 1, 4) is None  # another dim: nothing to read
    assert size_holds(PRODUCT, "x", 0, 2) is None  # a second size unknown
    assert size_holds("L['x'].stride()[0] == L['x'].size()[1]", "x", 1, 4) is None
    assert sizes_in_words(CONV_BOUND.split("  #")[0]) == "3 <= x dim 0 <= 15"


def test_32_bit_indexing_splits_no_size_near_and_a_conv_bound_does() -> None:
    assert not splits_near(INDEXING, "x", 1, 512)
    assert splits_near(CONV_BOUND, "x", 0, 4)


def test_the_tree_gives_each_size_guard_with_its_sites() -> None:
    tree = "\n".join([
        "TREE_GUARD_MANAGER:",
        "+- RootGuardManager",
        "| +- GLOBAL_STATE: ___check_global_state()",
        f"+- LAMBDA_GUARD: {CONV_BOUND}",
        "+- LAMBDA_GUARD: L['x'].stride()[0] == 768  # x.view(...)",
    ])  # fmt: skip
    assert size_guards(tree) == [CONV_BOUND]
