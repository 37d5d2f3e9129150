#pragma once
// The node procedures of GPU sparse add, C = ka·op(A) + kb·op(B) (seed 004
// section 6): a dual top-down traversal. A warp takes one pair of nodes at the
// same position in both operands (either may be absent), merges their entries
// in logical orientation, allocates the output node from a bump allocator,
// writes it, and enqueues the pairs of children with the address of the slot
// their new reference goes to (as the rebuilding copy does).
//
//  AddNode:  a pair of ordinary nodes, merged through occupancy bitmaps of
//            the node's cells: an entry's output place is its rank in the
//            union, so neither operand is sorted or searched (transposed
//            operands included) and the node type follows from the union's
//            count by the dense/sparse rule. Pairs of at most 32 entries are
//            merged in registers instead, and leaf pairs of at most 8 below
//            level 1 are merged and written by one lane of their parent
//            (SmallLeaf), never queued.
//            In a pool with wide nodes, AddNode also takes a level depth-2
//            pair whose sides are both standard sub-trees, tallying its
//            nodes (SubtreeTally) so that the COOW rule can be checked after
//            the run (perf-log A13).
//  AddWide:  a pair of level depth-2 sub-trees in a pool with wide (COOW)
//            nodes where a side is a COOW node (or no tally was free). Both are gathered into scratch as (key, value) in the
//            standard tree order (block row, block column, row, column),
//            sorted by counting passes where the gather order is not that,
//            merged, and written either as one COOW node or as an inner node
//            with its leaves, whichever the COOW rule picks (docs/format.md).
//
// Results are bit-identical to add_reference: products and the sum are
// rounded separately (no fused multiply-add), as the host computes them.
//
// A node that does not fit in the output pool raises a flag and is dropped
// with its sub-tree; the host then runs again with a larger pool.
#include "add_node.cuh"
#include "add_wide.cuh"
