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
//! the heap's growth: the compiler's shared tables grow by a hundred megabytes over a
//! benchmark, a fresh page at a time, and a first-time configuration that lands
//! on fresh pages took 50 us instead of 15. So `stencil bench` first faults in a
//! pool of heap, in blocks the allocator carves its pages from again (one huge
//! block it did not), while huge pages are still allowed (a few hundred faults, and
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

/// Size of the blocks the pool is faulted in as. mimalloc carves its small and
/// medium pages out of arena slices that a freed block of this size gives back;
/// a pool taken as one huge block did not come back that way: with the pool
/// faulted as a single 512 MiB block, a Kubernetes `--every 20` run still took
/// 7,300 page faults after it (221 of them inside stencil's masks, 12-44 per
/// mask, 200-650 us each), with 1 MiB blocks 660 (none inside a mask). 4 MiB
/// blocks did no better than one block; 256 KiB ones took 1,150.
const POOL_BLOCK_BYTES: usize = 1 << 20;

/// Touches a page in every 4 KiB of `bytes` of fresh heap, taken in
/// [`POOL_BLOCK_BYTES`] blocks, and frees it; the allocator serves later
/// allocations from those pages. Nothing where the memory is not there to take:
/// the whole pool is first asked for at once (untouched, so it costs no page).
fn prefault_heap(bytes: usize) {
    let mut probe: Vec<u8> = Vec::new();
    if probe.try_reserve_exact(bytes).is_err() {
        return;
    }
    drop(probe);
    let blocks: Vec<Vec<u8>> = (0..bytes.div_ceil(POOL_BLOCK_BYTES))
        .map(|_| touched_block(POOL_BLOCK_BYTES))
        .collect();
    drop(blocks);
}

/// A fresh `bytes`-long allocation with a byte written in every 4 KiB page.
fn touched_block(bytes: usize) -> Vec<u8> {
    let mut block: Vec<u8> = Vec::with_capacity(bytes);
    for page in block.spare_capacity_mut().iter_mut().step_by(4096) {
        page.write(1);
    }
    // The writes are the point: keep them from being dropped with the block.
    std::hint::black_box(block.as_mut_ptr());
    block
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

    /// Page faults this thread has taken so far (Linux counts them per thread).
    #[cfg(target_os = "linux")]
    fn thread_minor_faults() -> i64 {
        // SAFETY: getrusage writes into the zeroed struct it is given.
        unsafe {
            let mut usage: libc::rusage = std::mem::zeroed();
            assert_eq!(libc::getrusage(libc::RUSAGE_THREAD, &mut usage), 0);
            usage.ru_minflt
        }
    }

    /// What the pool is for: heap taken after it, in the sizes tables come in,
    /// lands on pages already faulted in: 410 faults for these 8,192 pages; a
    /// pool faulted as one huge block (before 1 MiB blocks) took 1,538.
    #[cfg(target_os = "linux")]
    #[test]
    fn later_allocations_land_on_the_pooled_pages() {
        const TAKEN: usize = 32 << 20;
        std::thread::spawn(|| {
            // Room to spare for what tests on other threads take meanwhile.
            prefer_latency(3 * TAKEN);
            let before = thread_minor_faults();
            let mut held: Vec<Vec<u8>> = Vec::new();
            let mut total = 0;
            for size in [4 << 10, 48 << 10, 200 << 10, 1 << 20].into_iter().cycle() {
                if total >= TAKEN {
                    break;
                }
                total += size;
                held.push(touched_block(size));
            }
            let faults = thread_minor_faults() - before;
            let pages = (TAKEN / 4096) as i64;
            assert!(
                faults < pages / 8,
                "{faults} page faults for {pages} pages taken after the pool"
            );
            std::hint::black_box(&held);
        })
        .join()
        .unwrap();
    }

    /// A pool larger than the address space is skipped, not an abort.
    #[test]
    fn an_impossible_pool_is_skipped() {
        prefault_heap(usize::MAX / 2);
    }
}
