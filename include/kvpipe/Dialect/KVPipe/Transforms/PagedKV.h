//===- PagedKV.h - addressing a paged K/V cache -----------------*- C++ -*-===//
//
// A paged K/V cache (vLLM, SGLang, flash-attn's `block_table`) stores the
// keys of all sequences in pages of `page_size` rows: key j of batch b is
// row j % page_size of page block_table[b][j / page_size]. A kernel's K and
// V tensor maps then describe the whole cache, (num_pages, page_size,
// heads_kv, head_dim) as (B, H, S, D); the producer asks this function where
// a logical key row is and loads from there. A function of (batch, logical
// key row) alone, so that any kernel family (forward, split-KV decode)
// addresses pages the same way.
//
//===----------------------------------------------------------------------===//

#ifndef KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PAGEDKV_H
#define KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PAGEDKV_H

#include "mlir/IR/ImplicitLocOpBuilder.h"

namespace kvpipe {

/// The block table of a paged cache, as kernel parameters.
struct PagedKVTable {
  /// `!llvm.ptr<1>` to i32 page indices, `maxPagesPerSeq` per batch.
  mlir::Value blockTable;
  /// i32: the row stride of the block table.
  mlir::Value maxPagesPerSeq;
  /// Rows per page.
  int64_t pageSize;
};

/// Where a logical key row is in a paged cache: the page (the tensor maps'
/// B coordinate) and the row in it (S). Both index values.
struct PagedKVAddress {
  mlir::Value page;
  mlir::Value rowInPage;
};

/// The address of logical key `keyRow` of batch `batch` (index values),
/// whose sequence has `seqKV` keys: one i32 load of the block table, by the
/// thread that builds it. The logical page is clamped to the sequence's last
/// page and to the table's row (`maxPagesPerSeq` - 1), so that no load
/// reads past the row whatever `keyRow` is: a row past the sequence is read
/// from its last page (callers mask such keys). The page index is used as
/// the table holds it: one outside the cache is out of the tensor maps'
/// bounds, which TMA fills with zeros.
PagedKVAddress buildPagedKVAddress(mlir::ImplicitLocOpBuilder &b,
                                   const PagedKVTable &table,
                                   mlir::Value batch, mlir::Value keyRow,
                                   mlir::Value seqKV);

} // namespace kvpipe

#endif // KVPIPE_DIALECT_KVPIPE_TRANSFORMS_PAGEDKV_H
