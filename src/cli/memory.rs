//! The command line's memory policy: latency over resident size.
//!
//! Masks are measured in microseconds, and on the virtual machines this project
//! runs on a fresh page costs more than most masks: about 10 us per 4 KiB page
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
//! masks for a living wants anyway. Every engine in the process (peers included)
//! runs under the same policy. Engines embedding the library choose their own.

use libmimalloc_sys::{mi_option_get, mi_option_set};

/// mimalloc v3's `mi_option_purge_delay` (the `libmimalloc-sys` bindings name
/// only v2's options).
const MI_OPTION_PURGE_DELAY: i32 = 15;

/// mimalloc's purge delay in v3 before anyone sets it: how this module checks
/// that option 15 is the purge delay before writing it.
const MI_V3_DEFAULT_PURGE_DELAY: std::os::raw::c_long = 1000;

/// Keeps the process's memory mapped once touched, in small pages. Leaves the
/// purge delay alone when option 15 does not hold v3's default (another mimalloc
/// whose options are numbered differently).
pub fn prefer_latency() {
    #[cfg(target_os = "linux")]
    // SAFETY: PR_SET_THP_DISABLE takes integer arguments only and changes a flag
    // of this process's memory map; failing (an old kernel) changes nothing.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    // SAFETY: reading and setting a mimalloc option is thread-safe and takes
    // plain integers.
    unsafe {
        if mi_option_get(MI_OPTION_PURGE_DELAY) == MI_V3_DEFAULT_PURGE_DELAY {
            mi_option_set(MI_OPTION_PURGE_DELAY, -1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both settings take: a mimalloc update that renumbers its options, or a
    /// platform where the call fails, shows here rather than as a slower bench.
    #[test]
    fn latency_policy_turns_off_huge_pages_and_purging() {
        prefer_latency();
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
}
