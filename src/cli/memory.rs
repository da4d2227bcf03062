//! The command line's memory policy: latency over resident size.
//!
//! Masks are measured in microseconds, and on the virtual machines this project
//! runs on a fresh page costs more than most masks: 1-10 us per 4 KiB page
//! touched for the first time (the host backs the guest's memory lazily) and 4-5
//! ms per transparent huge page (2 MiB zeroed and backed at once). Two defaults
//! turn that into the benchmark's tail:
//!
//! - mimalloc asks for huge pages on its arenas (`allow_thp`), so a mask that
//!   happens to grow the heap across a 2 MiB boundary takes 4-5 ms;
//! - mimalloc gives freed memory back to the kernel after a second
//!   (`purge_delay`), so the next grammar's tables fault the same pages in again.
//!
//! The CLI turns both off at start (`--allocator-defaults` keeps them): the heap
//! then stays at its peak instead of shrinking, which a process that computes
//! masks for a living wants anyway. Small pages alone still leave the tail to
//! the heap's growth: the process-wide tables grow by a hundred megabytes over a
//! benchmark, a fresh page at a time, and a first-time configuration that lands
//! on fresh pages took 50 us instead of 15. So `stencil bench` first faults in a
//! pool of heap while huge pages are still allowed (a few hundred faults, and
//! fewer TLB entries for what lands there: the vocabulary, the tables), frees
//! it, and only then turns huge pages off: a long-running server reaches the
//! same state once its heap stops growing. Every engine in the process (peers
//! included) runs under the same policy and allocates from the same pool.
//! Engines embedding the library choose their own.

use libmimalloc_sys::{mi_option_get, mi_option_set};

/// mimalloc v3's `mi_option_purge_delay` (the `libmimalloc-sys` bindings name
/// only v2's options).
const MI_OPTION_PURGE_DELAY: i32 = 15;

/// mimalloc's purge delay in v3 before anyone sets it: how this module checks
/// that option 15 is the purge delay before writing it.
const MI_V3_DEFAULT_PURGE_DELAY: std::os::raw::c_long = 1000;

/// Heap `stencil bench` faults in before anything else: the benchmark's peak
/// (about 320 MB with Llama-3 and llguidance side by side) with room to spare.
pub const BENCH_PREFAULT_BYTES: usize = 512 << 20;

/// Keeps the process's memory mapped once touched, faults in `prefault_bytes`
/// of heap (in huge pages where the allocator asks for them), then turns huge
/// pages off for what comes later. Leaves the purge delay alone when option 15
/// does not hold v3's default (another mimalloc whose options are numbered
/// differently).
pub fn prefer_latency(prefault_bytes: usize) {
    // SAFETY: reading and setting a mimalloc option is thread-safe and takes
    // plain integers. First: the pool, once freed, must stay mapped.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == MI_V3_DEFAULT_PURGE_DELAY {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
    prefault_heap(prefault_bytes);
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag
    // of this process's memory map (pages already mapped huge stay so); failing
    // (an old kernel) changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}

/// Touches a page in every 4 KiB of a fresh `bytes`-long allocation and frees
/// it; the allocator serves later allocations from those pages. Nothing where
/// the memory is not there to take.
fn prefault_heap(bytes: usize) {
    let mut pool: Vec<u8> = Vec::new();
    if pool.try_reserve_exact(bytes).is_err() {
        return;
    }
    for page in pool.spare_capacity_mut().iter_mut().step_by(4096) {
        page.write(1);
    }
    // The writes are the point: keep them from being dropped with the pool.
    std::hint::black_box(pool.as_mut_ptr());
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both settings take: a mimalloc update that renumbers its options, or a
    /// platform where the call fails, shows here rather than as a slower bench.
    #[test]
    fn latency_policy_turns_off_huge_pages_and_purging() {
        prefer_latency(1 << 20);
        #[cfg(target_os = "linux")]
        // SAFETY: as above; PR_GET_THP_DISABLE reads the flag.
        unsafe {
            assert_eq!(libc::prctl(libc::PR_GET_THP_DISABLE, 0, 0, 0, 0), 1);
        }
        // SAFETY: as above.
        unsafe {
            assert_eq!(mi_option_get(MI_OPTION_PURGE_DELAY), -1);
        }
    }

    /// A pool larger than the address space is skipped, not an abort.
    #[test]
    fn an_impossible_pool_is_skipped() {
        prefault_heap(usize::MAX / 2);
    }
}
