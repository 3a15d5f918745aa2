//! The one switch between real synchronisation and loom's models, as tokio's
//! `crate::loom` and crossbeam's `primitive` do it: every other module takes its
//! atomics and locks from here and names no `cfg(loom)` of its own.
//!
//! Invariant: each item has the same API and the same memory orderings in both builds,
//! so the code loom checks is the code that ships. Under loom the 128-bit word and the
//! spin lock are modelled by loom mutexes (loom has no 128-bit atomic, and a spin
//! loop would explode a model's state space); their orderings are at least as strong.
//! A third build, WebAssembly without the `atomics` feature (`single_threaded_wasm`,
//! set by the build script), has no threads at all: there the 128-bit word and the
//! configuration cell are plain cells.
// Keyed tables (feature `alloc`) are the only users of the 128-bit word, the lock and
// the prefetch; a build without them leaves those unused.
#![cfg_attr(not(feature = "alloc"), allow(dead_code, unused_imports))]

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
#[cfg(not(loom))]
pub(crate) use portable_atomic::{AtomicU64, AtomicUsize, Ordering};

/// A number no other call in this process returns (what refund ledgers and logs
/// are told apart by). A plain atomic in every build: it is not a word any model
/// checks, and loom's atomics cannot be statics.
pub(crate) fn next_id() -> u64 {
    static NEXT: portable_atomic::AtomicU64 = portable_atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, portable_atomic::Ordering::Relaxed)
}

/// Whether this is a loom build: models use smaller tables to stay tractable.
pub(crate) const LOOM: bool = cfg!(loom);

/// Whether code size counts for more than a branch saved: a WebAssembly module is
/// shipped to edge runtimes under a size budget, and its hot keyed path goes through
/// the caller's slot hint rather than a lookup.
pub(crate) const COMPACT: bool = cfg!(target_family = "wasm");

/// A 128-bit word updated only by compare-and-swap (`cmpxchg16b` where the CPU has it,
/// `portable-atomic`'s fallback elsewhere, a plain cell on single-threaded wasm).
#[derive(Debug)]
pub(crate) struct AtomicU128 {
    #[cfg(not(any(loom, single_threaded_wasm)))]
    word: portable_atomic::AtomicU128,
    #[cfg(single_threaded_wasm)]
    word: core::cell::Cell<u128>,
    #[cfg(loom)]
    word: loom::sync::Mutex<u128>,
}

// SAFETY: WebAssembly without the `atomics` feature has no threads and no shared
// memory: an instance's memory is only ever touched by the one thread running it, so
// no two accesses to the cell can overlap. portable-atomic would otherwise take a
// global seqlock for every 128-bit load and CAS here (≈ 7 ns of a keyed check in V8).
#[cfg(single_threaded_wasm)]
#[allow(unsafe_code)]
unsafe impl Sync for AtomicU128 {}

impl AtomicU128 {
    pub(crate) fn new(value: u128) -> Self {
        Self {
            #[cfg(not(any(loom, single_threaded_wasm)))]
            word: portable_atomic::AtomicU128::new(value),
            #[cfg(single_threaded_wasm)]
            word: core::cell::Cell::new(value),
            #[cfg(loom)]
            word: loom::sync::Mutex::new(value),
        }
    }

    /// The value (acquire).
    #[inline]
    pub(crate) fn load(&self) -> u128 {
        #[cfg(not(any(loom, single_threaded_wasm)))]
        return self.word.load(Ordering::Acquire);
        #[cfg(single_threaded_wasm)]
        return self.word.get();
        #[cfg(loom)]
        return *self.word.lock().unwrap();
    }

    /// Replaces `current` with `new` (acquire-release), or returns what was there.
    #[inline]
    pub(crate) fn cas(&self, current: u128, new: u128) -> Result<(), u128> {
        #[cfg(not(any(loom, single_threaded_wasm)))]
        return self
            .word
            .compare_exchange(current, new, Ordering::AcqRel, Ordering::Acquire)
            .map(|_| ());
        #[cfg(single_threaded_wasm)]
        return match self.word.get() {
            v if v == current => {
                self.word.set(new);
                Ok(())
            }
            v => Err(v),
        };
        #[cfg(loom)]
        {
            let mut v = self.word.lock().unwrap();
            if *v == current {
                *v = new;
                Ok(())
            } else {
                Err(*v)
            }
        }
    }
}

/// A one-byte lock held for a few loads: spun on with crossbeam's backoff. Nothing on
/// WebAssembly without threads, where nobody else can hold it.
#[derive(Debug)]
pub(crate) struct SpinLock {
    #[cfg(not(any(loom, single_threaded_wasm)))]
    held: portable_atomic::AtomicU8,
    #[cfg(loom)]
    held: loom::sync::Mutex<()>,
}

/// Holds a [`SpinLock`] until dropped.
pub(crate) struct SpinGuard<'a> {
    #[cfg(not(any(loom, single_threaded_wasm)))]
    lock: &'a SpinLock,
    #[cfg(loom)]
    _guard: loom::sync::MutexGuard<'a, ()>,
    #[cfg(single_threaded_wasm)]
    _lock: core::marker::PhantomData<&'a SpinLock>,
}

impl SpinLock {
    pub(crate) fn new() -> Self {
        Self {
            #[cfg(not(any(loom, single_threaded_wasm)))]
            held: portable_atomic::AtomicU8::new(0),
            #[cfg(loom)]
            held: loom::sync::Mutex::new(()),
        }
    }

    pub(crate) fn lock(&self) -> SpinGuard<'_> {
        #[cfg(single_threaded_wasm)]
        return SpinGuard {
            _lock: core::marker::PhantomData,
        };
        #[cfg(not(any(loom, single_threaded_wasm)))]
        {
            let backoff = crossbeam_utils::Backoff::new();
            while self
                .held
                .compare_exchange_weak(0, 1, Ordering::Acquire, Ordering::Relaxed)
                .is_err()
            {
                backoff.snooze();
            }
            SpinGuard { lock: self }
        }
        #[cfg(loom)]
        SpinGuard {
            _guard: self.held.lock().unwrap(),
        }
    }
}

#[cfg(not(any(loom, single_threaded_wasm)))]
impl Drop for SpinGuard<'_> {
    fn drop(&mut self) {
        self.lock.held.store(0, Ordering::Release);
    }
}

/// Starts loading cache lines ahead of their use: a hint, which reads nothing and
/// cannot fault. A no-op under loom and miri, and off x86-64.
///
/// Where the CPU has `prefetchw` (every AMD x86-64, Intel since Broadwell; CPUID
/// leaf 0x8000_0001, ECX bit 8, asked once when the prefetcher is made), a line is
/// asked for *to be written*: it arrives owned, so the compare-and-swap that follows
/// a load of it does not make a second trip to take it from another core (two threads
/// of the keyed benchmark: about 15 % less time a check, BENCHMARKS.md). Elsewhere it
/// is asked for reading.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Prefetcher {
    for_write: bool,
}

impl Prefetcher {
    /// A prefetcher for this CPU.
    pub(crate) fn detect() -> Self {
        Self {
            for_write: has_prefetchw(),
        }
    }

    /// Starts loading `p`'s cache line, to be written soon.
    #[inline(always)]
    pub(crate) fn line<T>(self, p: *const T) {
        #[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
        // SAFETY: both are hints that read nothing and cannot fault, and `prefetchw`
        // is only executed on a CPU that reported it.
        #[allow(unsafe_code)]
        unsafe {
            if self.for_write {
                core::arch::asm!(
                    "prefetchw byte ptr [{p}]",
                    p = in(reg) p,
                    options(nostack, preserves_flags, readonly)
                );
            } else {
                core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
            }
        }
        #[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
        let _ = (self.for_write, p);
    }
}

/// Whether the CPU executes `prefetchw` (CPUID.8000_0001H:ECX.PRFCHW).
#[cfg(all(target_arch = "x86_64", not(loom), not(miri)))]
#[allow(unsafe_code, unused_unsafe)]
fn has_prefetchw() -> bool {
    use core::arch::x86_64::__cpuid;
    // SAFETY: CPUID exists on every x86-64 CPU; the extended leaf is read only when
    // the CPU reports it.
    unsafe { __cpuid(0x8000_0000).eax >= 0x8000_0001 && __cpuid(0x8000_0001).ecx & (1 << 8) != 0 }
}

#[cfg(not(all(target_arch = "x86_64", not(loom), not(miri))))]
fn has_prefetchw() -> bool {
    false
}

/// A value read on every check and replaced as a whole now and then (a keyed table's
/// algorithm configuration): crossbeam's `AtomicCell` (a seqlock for values wider
/// than a native atomic), a plain cell on single-threaded wasm (where the seqlock is
/// dead weight: 1.3 KB of the edge module).
pub(crate) struct ConfigCell<T: Copy> {
    #[cfg(not(single_threaded_wasm))]
    value: crossbeam_utils::atomic::AtomicCell<T>,
    #[cfg(single_threaded_wasm)]
    value: core::cell::Cell<T>,
}

// SAFETY: as for `AtomicU128` above: no two accesses can overlap without threads.
#[cfg(single_threaded_wasm)]
#[allow(unsafe_code)]
unsafe impl<T: Copy + Send> Sync for ConfigCell<T> {}

impl<T: Copy> ConfigCell<T> {
    pub(crate) fn new(value: T) -> Self {
        Self {
            #[cfg(not(single_threaded_wasm))]
            value: crossbeam_utils::atomic::AtomicCell::new(value),
            #[cfg(single_threaded_wasm)]
            value: core::cell::Cell::new(value),
        }
    }

    #[inline]
    pub(crate) fn load(&self) -> T {
        #[cfg(not(single_threaded_wasm))]
        return self.value.load();
        #[cfg(single_threaded_wasm)]
        return self.value.get();
    }

    pub(crate) fn store(&self, value: T) {
        #[cfg(not(single_threaded_wasm))]
        self.value.store(value);
        #[cfg(single_threaded_wasm)]
        self.value.set(value);
    }
}
