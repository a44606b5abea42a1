//! [`Line`] and [`Lines`]: the table's cache lines of four slots, every shard's in one
//! allocation, which the operating system is asked to back with huge pages when it spans at
//! least one; and how a shard's lines and slots are found in it.
//!
//! A keyed hit costs one cache miss on its key's line, and on 4 KiB pages a page walk as well:
//! at a million keys the table spans about 4 600 pages, more than the TLB holds; on 2 MiB pages
//! it spans ten (`scripts/no-thp` runs a bench without them, to compare). On Linux the allocation is aligned to
//! 2 MiB and advised with `madvise(MADV_HUGEPAGE)` before its first write, which the kernel
//! honours when transparent huge pages are `always` or `madvise` (with the `std` feature).
//! Elsewhere, or where the system declines, the lines are ordinary pages and nothing else changes.

use core::alloc::Layout;
use core::ptr::NonNull;

use super::{Shard, Table};
use crate::keyed::slot::{Slot, Tag};

/// Slots per cache line.
pub(super) const LINE: usize = 4;

/// Four slots on one 64-byte cache line.
#[derive(Debug)]
#[repr(C, align(64))]
pub(super) struct Line(pub(super) [Slot; LINE]);

impl Line {
    /// Four empty slots.
    fn empty() -> Self {
        Self(core::array::from_fn(|_| Slot::empty()))
    }
}

impl Table {
    /// `shard`'s lines.
    #[inline(always)]
    pub(super) fn lines<'a>(&'a self, shard: &Shard) -> &'a [Line] {
        &self.lines[shard.first..][..self.shard_lines]
    }

    /// Slots per shard.
    #[inline(always)]
    pub(super) fn shard_len(&self) -> usize {
        self.shard_lines * LINE
    }

    /// Slot `i` (below [`shard_len`](Self::shard_len)) of `shard`.
    #[inline(always)]
    pub(super) fn slot<'a>(&'a self, shard: &Shard, i: usize) -> &'a Slot {
        &self.lines(shard)[i / LINE].0[i % LINE]
    }

    /// Starts loading the home line of `tag` into the caches without waiting for it, so that a
    /// lookup of `tag` soon after (another quota's, while this one decides) finds it there or
    /// on its way.
    #[inline(always)]
    pub(crate) fn prefetch(&self, tag: Tag) {
        if let Some(line) = self.lines.get(self.line_of(tag)) {
            prefetch(line);
        }
    }
}

/// Asks the CPU to start loading `line` into its caches; the instruction retires at once, and
/// the load goes on while later instructions run.
#[inline(always)]
fn prefetch(line: &Line) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: `prefetcht0` is SSE, part of every x86-64 CPU; it reads nothing into the program
    // and never faults, and `line` is a valid reference anyway.
    unsafe {
        use core::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        _mm_prefetch::<_MM_HINT_T0>((line as *const Line).cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = line;
}

/// The size of a huge page (x86-64 and most 64-bit Linux targets) and the alignment of tables
/// that span at least one.
const HUGE_PAGE: usize = 2 << 20;

/// `len` cache lines, initialized empty, in one allocation owned like a `Box<[Line]>`.
pub(super) struct Lines {
    ptr: NonNull<Line>,
    len: usize,
    /// The allocation's layout (unused when `len` is 0: nothing was allocated).
    layout: Layout,
}

// SAFETY: `Lines` owns its lines as a `Box<[Line]>` would, and gives out only shared
// references to them; `Line` is `Send` and `Sync` (atomics).
unsafe impl Send for Lines {}
// SAFETY: as above.
unsafe impl Sync for Lines {}

impl Lines {
    /// `len` empty lines; `None` if they would not fit in memory.
    pub(super) fn new(len: usize) -> Option<Self> {
        let bytes = len.checked_mul(core::mem::size_of::<Line>())?;
        let align = if bytes >= HUGE_PAGE {
            HUGE_PAGE
        } else {
            core::mem::align_of::<Line>()
        };
        let layout = Layout::from_size_align(bytes, align).ok()?;
        if len == 0 {
            return Some(Self {
                ptr: NonNull::dangling(),
                len,
                layout,
            });
        }
        // SAFETY: `layout` has a nonzero size (`len ≥ 1` lines of 64 bytes).
        let ptr = NonNull::new(unsafe { alloc::alloc::alloc(layout) }.cast::<Line>())?;
        if align == HUGE_PAGE {
            advise_huge_pages(ptr.cast(), bytes / HUGE_PAGE * HUGE_PAGE);
        }
        for i in 0..len {
            // SAFETY: `i < len`: the write is inside the allocation, aligned for `Line` (the
            // layout's alignment is at least `Line`'s and its size a multiple of it), to memory
            // holding nothing to drop.
            unsafe { ptr.as_ptr().add(i).write(Line::empty()) };
        }
        Some(Self { ptr, len, layout })
    }
}

impl core::ops::Deref for Lines {
    type Target = [Line];

    #[inline(always)]
    fn deref(&self) -> &[Line] {
        // SAFETY: `ptr` holds `len` initialized lines (or is dangling with `len` 0), owned by
        // `self` until it drops, and only shared references are ever made to them.
        unsafe { core::slice::from_raw_parts(self.ptr.as_ptr(), self.len) }
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        if self.len == 0 {
            return;
        }
        // SAFETY: the `len` lines are initialized and dropped once, here; then the memory is
        // freed with the layout it was allocated with.
        unsafe {
            core::ptr::drop_in_place(core::ptr::slice_from_raw_parts_mut(
                self.ptr.as_ptr(),
                self.len,
            ));
            alloc::alloc::dealloc(self.ptr.as_ptr().cast(), self.layout);
        }
    }
}

impl core::fmt::Debug for Lines {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Lines")
            .field("len", &self.len)
            .field("align", &self.layout.align())
            .finish()
    }
}

/// Asks the kernel to back the `bytes` (whole huge pages) at `at` with huge pages. Advice only:
/// a refusal (transparent huge pages off, an old kernel) leaves ordinary pages. (Only with
/// `std`: a build without it may run where Linux's system calls are not the way to the kernel.)
#[cfg(all(target_os = "linux", feature = "std"))]
fn advise_huge_pages(at: NonNull<u8>, bytes: usize) {
    // SAFETY: the range is whole huge pages inside an allocation this module owns and has not
    // written yet; the advice changes how the kernel backs it, never its contents or validity.
    let _ = unsafe { libc::madvise(at.as_ptr().cast(), bytes, libc::MADV_HUGEPAGE) };
}

/// Elsewhere, ordinary pages.
#[cfg(not(all(target_os = "linux", feature = "std")))]
fn advise_huge_pages(_at: NonNull<u8>, _bytes: usize) {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_empty_aligned_and_freed() {
        // Below, at and above one huge page, and none.
        for len in [
            0,
            1,
            3,
            HUGE_PAGE / 64 - 1,
            HUGE_PAGE / 64,
            HUGE_PAGE / 64 * 2 + 5,
        ] {
            let lines = Lines::new(len).expect("fits");
            assert_eq!(lines.len(), len);
            let align = if len * 64 >= HUGE_PAGE { HUGE_PAGE } else { 64 };
            assert_eq!(lines.as_ptr() as usize % align, 0, "len {len}");
            for (i, line) in lines.iter().enumerate() {
                for slot in &line.0 {
                    assert_eq!(slot.tag(), crate::keyed::slot::EMPTY, "line {i}");
                }
            }
        }
    }

    #[test]
    fn a_home_line_over_the_table_is_its_shards_first_line_plus_its_home_line() {
        use crate::observe::TableMetrics;
        // Tags at the edges of the range and of the shards, and a Weyl walk over the rest.
        let mut tags = vec![0, 1, 2, u64::MAX, u64::MAX - 1, 1 << 63, (1 << 63) - 1];
        let mut tag = 0x2545_f491_4f6c_dd1d_u64;
        for _ in 0..10_000 {
            tag = tag.wrapping_add(0x9e37_79b9_7f4a_7c15);
            tags.push(tag);
        }
        for (keys, shards) in [(1, 1), (37, 2), (1_000, 8), (100_000, 8), (100_000, 256)] {
            let table = Table::new(keys, shards, 1, 7, TableMetrics::none()).expect("fits");
            for &tag in &tags {
                let line = table.shard(tag).first + table.home_line(tag);
                assert_eq!(
                    table.line_of(tag),
                    line,
                    "{keys} keys, {shards} shards, tag {tag:#x}"
                );
            }
        }
    }

    #[test]
    fn too_many_lines_is_none() {
        assert!(Lines::new(usize::MAX / 32).is_none());
        assert!(Lines::new(usize::MAX).is_none());
    }
}
