//! The scan's CPU twin: the canonical grouping of `crate::tree`, on the caller's rayon pool.
//!
//! Short inputs (or a width of one) are scanned in one pass on the caller's thread. Longer
//! ones go by power-of-two chunks which the threads take in order (`scan_chained`): a
//! thread computes its chunk's tree, pushes it onto the shared binary counter of trees once
//! the chunks before have pushed theirs (which gives the chunk its exclusive prefix and,
//! for a full chunk, the prefix through its end), then scans the chunk from its prefix,
//! reading its inputs a second time from the core's cache.
//!
//! A run of positions goes by aligned groups of 256 (`scan_run`): the group's tree level by
//! level, then its prefixes level by level from the top, each level a loop of independent
//! combines that the compiler puts in vector lanes (in the widest registers the CPU has:
//! copies compiled for AVX2 and AVX-512 are chosen at run time). A binary counter over the
//! groups' trees carries the prefix across groups. Inputs are prefetched a few groups ahead,
//! and a large output is written around the caches (non-temporal stores), which saves the
//! read of every output line a store would otherwise cost.

use super::ScanKind;
use crate::cpu::Cpu;
use crate::element::DeviceValue;
use crate::error::Result;
use crate::ops::check::{check_scan_lengths, check_scannable};
use crate::ops::Operator;
use crate::tree::{subtree, Lifted, PrefixStack};
use rayon::prelude::*;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

/// The input bytes of a chunk of the parallel scan (read twice: the second time from the
/// core's cache).
const CHUNK_BYTES: usize = 1 << 18;

/// A vector of `n` all-zero values, every one of which the caller overwrites. Nothing is
/// computed for it (`finish(identity, 0)` may not be defined for an operator).
pub(crate) fn zeroed_vec<V: DeviceValue>(n: usize) -> Vec<V> {
    // SAFETY: DeviceValue types are ValidAsZeroBits.
    vec![unsafe { std::mem::zeroed::<V>() }; n]
}

impl Cpu {
    /// The scan of `x` with `op`: output `i` is `finish(prefix, count)` with the prefix of
    /// the inputs up to and including `i` ([`ScanKind::Inclusive`], count `i + 1`) or before
    /// it ([`ScanKind::Exclusive`], count `i`; output 0 is `finish(identity, 0)`). No other
    /// output is computed: `finish` is called once per position, with the counts above.
    ///
    /// Every prefix follows the canonical grouping (crate docs), the same as the GPU's, so
    /// for operators built from `+ - * /`, min, max and comparisons the bits agree.
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let running_max = Cpu::new().scan(&[1, 5, 2, 7], ops::Max, ScanKind::Inclusive)?;
    /// assert_eq!(running_max, [1, 5, 5, 7]);
    /// let means = Cpu::new().scan(&[2.0f64, 4.0, 6.0], ops::Mean, ScanKind::Inclusive)?;
    /// assert_eq!(means, [2.0, 3.0, 4.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        op: O,
        kind: ScanKind,
    ) -> Result<Vec<O::Out>> {
        check_scannable::<T, O>()?;
        let mut out = zeroed_vec(x.len());
        self.scan_into(x, &mut out, op, kind)?;
        Ok(out)
    }

    /// The scan of `x` into `out`, which must have the same length
    /// ([`ErrorKind::LengthMismatch`](crate::ErrorKind::LengthMismatch) otherwise).
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let mut out = [0u128; 4];
    /// Cpu::new().scan_into(&[3u32, 1, 4, 1], &mut out, ops::WideSum, ScanKind::Exclusive)?;
    /// assert_eq!(out, [0, 3, 4, 8]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_into<T: DeviceValue, O: Operator<T>>(
        &self,
        x: &[T],
        out: &mut [O::Out],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_scan_lengths(x.len(), out.len())?;
        check_scannable::<T, O>()?;
        crate::laws::debug_check(&op, x, "Cpu::scan")?;
        self.scan_with(&op, kind, x, out);
        Ok(())
    }

    /// The scan of `x` in place, for operators whose output type is the input type.
    ///
    /// ```
    /// use cufold::{ops, Cpu, ScanKind};
    /// let mut x = [1.0f32, 2.0, 3.0, 4.0];
    /// Cpu::new().scan_in_place(&mut x, ops::Sum, ScanKind::Inclusive)?;
    /// assert_eq!(x, [1.0, 3.0, 6.0, 10.0]);
    /// # Ok::<(), cufold::Error>(())
    /// ```
    pub fn scan_in_place<T: DeviceValue, O: Operator<T, Out = T>>(
        &self,
        x: &mut [T],
        op: O,
        kind: ScanKind,
    ) -> Result<()> {
        check_scannable::<T, O>()?;
        crate::laws::debug_check(&op, x, "Cpu::scan_in_place")?;
        let n = x.len();
        if !self.parallel(n) {
            // One pass: every group of positions is read before any of it is written.
            let stream = std::mem::size_of_val(x) >= STREAM_MIN_BYTES;
            let io = &mut InPlace {
                x,
                view: |s| s,
                first: 0,
                stream,
            };
            scan_run(&op, None, None, kind, io);
            return Ok(());
        }
        self.scan_chained(&op, kind, Source::Output(|s| s), x);
        Ok(())
    }

    /// The scan of `x` into `out` (of the same length), with no checks: for callers that
    /// made them (the segmented scans' long segments).
    pub(crate) fn scan_with<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        x: &[T],
        out: &mut [O::Out],
    ) {
        if !self.parallel(x.len()) {
            scan_run(op, None, None, kind, &mut Lift::new(x, 0, out));
            return;
        }
        self.scan_chained(op, kind, Source::Slice(x), out);
    }

    /// The parallel scan into `out`, by aligned chunks of a power-of-two length, which the
    /// threads take in order. A thread computes its chunk's tree, waits until the chunks
    /// before it have pushed theirs onto the shared counter of trees, pushes its own (its
    /// prefixes: the one before it and, for a full chunk, the one through its end; a
    /// combine or two), then scans the chunk from its prefix, reading its inputs a second
    /// time from the core's cache. One pass over memory, and no round where every thread
    /// waits for the slowest. A chunk's inputs are all read before its outputs are
    /// written, and no chunk reads another's, so the input may be the output
    /// (`Source::Output`).
    fn scan_chained<T: DeviceValue, O: Operator<T>>(
        &self,
        op: &O,
        kind: ScanKind,
        src: Source<'_, T, O::Out>,
        out: &mut [O::Out],
    ) {
        let size = std::mem::size_of::<T>().max(1);
        let chunk = (CHUNK_BYTES / size).next_power_of_two().max(1 << 12);
        let stream = std::mem::size_of_val(out) >= STREAM_MIN_BYTES;
        let slots: Vec<Mutex<Option<&mut [O::Out]>>> =
            out.chunks_mut(chunk).map(|c| Mutex::new(Some(c))).collect();
        let chain = Chain {
            next: AtomicUsize::new(0),
            pushed: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            stack: Mutex::new(PrefixStack::new(None)),
        };
        let one = |c: usize| {
            let ys = lock(&slots[c]).take().expect("each chunk is taken once");
            let first = c * chunk;
            let full = ys.len() == chunk;
            let tree = |xs: &[T]| {
                full.then(|| subtree(op, &Lifted(xs, first as u64), 0, chunk, &mut Vec::new()))
            };
            let prefixes = |tree: Option<O::Acc>| {
                chain.push(c, |stack| {
                    let base = stack.prefix();
                    let end = tree.map(|t| {
                        stack.push(|a, b| op.combine(a, b), t);
                        stack.prefix().expect("non-empty after a push")
                    });
                    (base, end)
                })
            };
            // `None`: a chunk before this one failed, and its panic is the call's.
            let first = first as u64;
            match src {
                Source::Slice(x) => {
                    let xs = &x[c * chunk..c * chunk + ys.len()];
                    if let Some((base, end)) = prefixes(tree(xs)) {
                        scan_run(op, base, end, kind, &mut Lift::new(xs, first, ys));
                    }
                }
                Source::Output(view) => {
                    if let Some((base, end)) = prefixes(tree(view(ys))) {
                        let io = &mut InPlace {
                            x: ys,
                            view,
                            first,
                            stream,
                        };
                        scan_run(op, base, end, kind, io);
                    }
                }
            }
        };
        let chunks = slots.len();
        let workers = self.threads().min(chunks);
        (0..workers).into_par_iter().with_max_len(1).for_each(|_| {
            while let Some(c) = chain.claim(chunks) {
                let guard = FailOnUnwind(&chain.failed);
                one(c);
                std::mem::forget(guard);
            }
        });
    }
}

/// Locks `m`, whether or not a thread panicked holding it (what it guards stays valid).
fn lock<V>(m: &Mutex<V>) -> std::sync::MutexGuard<'_, V> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The shared state of a chained scan: the next chunk to take, how many chunks have pushed
/// their trees, whether one failed, and the counter of trees.
struct Chain<A> {
    next: AtomicUsize,
    pushed: AtomicUsize,
    failed: AtomicBool,
    stack: Mutex<PrefixStack<A>>,
}

impl<A> Chain<A> {
    /// The next chunk, in order (`None` when all are taken, or after a failure).
    fn claim(&self, chunks: usize) -> Option<usize> {
        if self.failed.load(Ordering::Acquire) {
            return None;
        }
        let c = self.next.fetch_add(1, Ordering::Relaxed);
        (c < chunks).then_some(c)
    }

    /// Runs `f` on the counter once chunks `0..c` have pushed (they were taken before `c`,
    /// by running threads, so they get there), then lets chunk `c + 1` go; `None` if a
    /// chunk failed while this one waited.
    fn push<R>(&self, c: usize, f: impl FnOnce(&mut PrefixStack<A>) -> R) -> Option<R> {
        let mut spins = 0u32;
        while self.pushed.load(Ordering::Acquire) != c {
            if self.failed.load(Ordering::Acquire) {
                return None;
            }
            spins += 1;
            if spins < 64 {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        let r = f(&mut lock(&self.stack));
        self.pushed.store(c + 1, Ordering::Release);
        Some(r)
    }
}

/// Marks a chained scan failed when dropped: forgotten when a chunk completes, dropped by
/// the unwinding of a panicking operator, so that the threads waiting for that chunk stop.
struct FailOnUnwind<'a>(&'a AtomicBool);

impl Drop for FailOnUnwind<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Where a parallel scan reads its inputs: a slice, or the output itself (in place).
#[derive(Clone, Copy)]
enum Source<'a, T, U> {
    Slice(&'a [T]),
    Output(fn(&[U]) -> &[T]),
}

/// Where a run of positions is read and written: its accumulators, its outputs.
pub(crate) trait RunIo<T: DeviceValue, O: Operator<T>> {
    /// The number of positions.
    fn len(&self) -> usize;
    /// The global index of the run's first position (what `finish` counts from).
    fn first(&self) -> u64;
    /// The accumulators of positions `i..i + dst.len()` of the run, into `dst`.
    fn load(&self, op: &O, i: usize, dst: &mut [O::Acc]);
    /// The outputs of positions `i..i + len`. A group's outputs are asked for after its
    /// inputs are loaded, so the outputs may be the inputs.
    fn out(&mut self, i: usize, len: usize) -> &mut [O::Out];
    /// Whether the outputs are written around the caches (a large scan's output, which
    /// would only evict its input: [`copy_out`]).
    fn stream(&self) -> bool;
}

/// Outputs of at least this many bytes are written around the caches: a store that misses
/// the cache first reads its line from memory, a third more traffic than the scan needs.
const STREAM_MIN_BYTES: usize = 1 << 23;

/// `dst = src`, by non-temporal stores where `stream` holds and `dst` is aligned for them
/// (the bytes are copied as they are, whatever the type); [`fence`] orders them before
/// what follows.
#[inline(always)]
fn copy_out<U: Copy>(dst: &mut [U], src: &[U], stream: bool) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{__m128i, _mm_loadu_si128, _mm_stream_si128};
        let bytes = std::mem::size_of_val(src);
        let (d, s) = (dst.as_mut_ptr() as *mut u8, src.as_ptr() as *const u8);
        if stream && dst.len() == src.len() && d as usize % 16 == 0 && bytes % 16 == 0 {
            for k in (0..bytes).step_by(16) {
                // SAFETY: both ranges hold `bytes` bytes (equal lengths); `d + k` is
                // 16-byte aligned; SSE2 is part of x86_64. Any bytes are valid for U, as
                // they are a copy of a U's.
                unsafe {
                    let v = _mm_loadu_si128(s.add(k) as *const __m128i);
                    _mm_stream_si128(d.add(k) as *mut __m128i, v);
                }
            }
            return;
        }
    }
    let _ = stream;
    dst.copy_from_slice(src);
}

/// Orders the non-temporal stores of [`copy_out`] before the stores that follow (another
/// thread reading the output after a join sees them).
fn fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: SSE is part of x86_64.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    }
}

/// A run lifted from a slice (`lift(x[i], first + i)`) into another.
pub(crate) struct Lift<'a, T, U> {
    x: &'a [T],
    first: u64,
    out: &'a mut [U],
    stream: bool,
}

impl<'a, T, U> Lift<'a, T, U> {
    /// Lifts `x[i]` with index `first + i`, into `out` (as long as `x`).
    pub(crate) fn new(x: &'a [T], first: u64, out: &'a mut [U]) -> Self {
        let stream = std::mem::size_of_val(out) >= STREAM_MIN_BYTES;
        Lift {
            x,
            first,
            out,
            stream,
        }
    }
}

impl<T: DeviceValue, O: Operator<T>> RunIo<T, O> for Lift<'_, T, O::Out> {
    fn len(&self) -> usize {
        self.x.len()
    }
    fn first(&self) -> u64 {
        self.first
    }
    #[inline(always)]
    fn load(&self, op: &O, i: usize, dst: &mut [O::Acc]) {
        let at = self.first + i as u64;
        let n = dst.len();
        prefetch(&self.x[(i + PREFETCH_GROUPS * n).min(self.x.len())..], n);
        for (k, (d, &v)) in dst.iter_mut().zip(&self.x[i..i + n]).enumerate() {
            *d = op.lift(v, at + k as u64);
        }
    }
    #[inline(always)]
    fn out(&mut self, i: usize, len: usize) -> &mut [O::Out] {
        &mut self.out[i..i + len]
    }
    fn stream(&self) -> bool {
        self.stream
    }
}

/// How many loads ahead a run's inputs are prefetched: the hardware's prefetchers alone
/// leave the memory idle while a group is computed (one thread, 10^7 and 10^8 f32 on the
/// 2-core build machine: 0.90-1.01 and 0.95 ns per element without, 0.80-0.86 and 0.84
/// with; 2 to 8 groups ahead measured alike).
const PREFETCH_GROUPS: usize = 4;

/// Asks for the cache lines of the first `n` values of `x` (or fewer, at its end).
#[inline(always)]
fn prefetch<T>(x: &[T], n: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
        let bytes = std::mem::size_of_val(&x[..n.min(x.len())]);
        let p = x.as_ptr() as *const i8;
        for k in (0..bytes).step_by(64) {
            // SAFETY: a prefetch does not fault; the address is within `x`.
            unsafe { _mm_prefetch::<_MM_HINT_T0>(p.add(k)) };
        }
    }
}

/// A run scanned in place: the inputs are a view of the outputs (`view` is the identity of
/// an operator whose output is its input type).
struct InPlace<'a, T, U> {
    x: &'a mut [U],
    view: fn(&[U]) -> &[T],
    first: u64,
    stream: bool,
}

impl<T: DeviceValue, O: Operator<T>> RunIo<T, O> for InPlace<'_, T, O::Out> {
    fn len(&self) -> usize {
        self.x.len()
    }
    fn first(&self) -> u64 {
        self.first
    }
    #[inline(always)]
    fn load(&self, op: &O, i: usize, dst: &mut [O::Acc]) {
        let at = self.first + i as u64;
        let n = dst.len();
        prefetch(&self.x[(i + PREFETCH_GROUPS * n).min(self.x.len())..], n);
        let x = (self.view)(&self.x[i..i + n]);
        for (k, (d, &v)) in dst.iter_mut().zip(x).enumerate() {
            *d = op.lift(v, at + k as u64);
        }
    }
    #[inline(always)]
    fn out(&mut self, i: usize, len: usize) -> &mut [O::Out] {
        &mut self.x[i..i + len]
    }
    fn stream(&self) -> bool {
        self.stream
    }
}

/// Scans a run of positions (`io`; its first position a multiple of a power of two at
/// least its length, or 0) from the exclusive prefix `base` of the positions before it;
/// `end`, when given, is the prefix through the last position (which is not `base`
/// extended by the run's tree in general: the tree of a full chunk may merge with earlier
/// blocks).
///
/// The run goes by aligned groups of [`GROUP`] positions (of eight where an accumulator is
/// large), then the rest one by one. A binary counter over the groups' trees carries the
/// prefix across groups; within a group, the prefixes come from the group's tree, level by
/// level from the top (`group_prefixes`): loops without a dependency between their
/// iterations, which the compiler puts in vector lanes, where a sequential loop waits on
/// every combine.
pub(crate) fn scan_run<T: DeviceValue, O: Operator<T>>(
    op: &O,
    base: Option<O::Acc>,
    end: Option<O::Acc>,
    kind: ScanKind,
    io: &mut impl RunIo<T, O>,
) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx512f") {
            // SAFETY: the CPU has the features this copy was compiled for.
            return unsafe { isa::avx512(op, base, end, kind, io) };
        }
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: as above.
            return unsafe { isa::avx2(op, base, end, kind, io) };
        }
    }
    scan_run_body(op, base, end, kind, io)
}

/// Copies of [`scan_run_body`] compiled for wider vector registers, chosen at run time (the
/// same operations in the same order: the same bits, as `crate::tree`'s copies).
#[cfg(target_arch = "x86_64")]
mod isa {
    use super::*;
    macro_rules! copy_for {
        ($name:ident, $features:literal) => {
            #[target_feature(enable = $features)]
            pub(super) unsafe fn $name<T: DeviceValue, O: Operator<T>>(
                op: &O,
                base: Option<O::Acc>,
                end: Option<O::Acc>,
                kind: ScanKind,
                io: &mut impl RunIo<T, O>,
            ) {
                scan_run_body(op, base, end, kind, io)
            }
        };
    }
    copy_for!(avx2, "avx2");
    copy_for!(avx512, "avx512f,avx512bw,avx512dq,avx512vl");
}

/// Positions per group of [`scan_run`] for accumulators of at most [`GROUP_ACC_BYTES`].
const GROUP: usize = 256;
/// The largest accumulator scanned in groups of [`GROUP`] (larger ones: groups of eight,
/// to keep a group's arrays small on the stack).
const GROUP_ACC_BYTES: usize = 32;

// scan_run_body and the functions under it are inlined into one another where the build
// optimises (`inline(always)`: the chunks' loops need fixed lengths and the ISA copies need
// the body), and are plain functions in a debug build: forced inlining there copied every
// chunk body about 3,000 times per operator and element type (ten levels, five chunk sizes,
// two groups, three ISA copies, two outputs), and the GPU scan tests, which instantiate every
// operator for nine element types, took over 40 minutes and 24 GB of memory to compile.
#[cfg_attr(not(debug_assertions), inline(always))]
fn scan_run_body<T: DeviceValue, O: Operator<T>>(
    op: &O,
    base: Option<O::Acc>,
    end: Option<O::Acc>,
    kind: ScanKind,
    io: &mut impl RunIo<T, O>,
) {
    let len = io.len();
    let mut from = 0;
    let mut prefix = base;
    if std::mem::size_of::<O::Acc>() <= GROUP_ACC_BYTES {
        (from, prefix) = scan_groups::<T, O, GROUP>(op, from, prefix, end, kind, io);
    }
    // What is left (all of it for large accumulators): groups of eight, from the prefix of
    // the groups before. The blocks of fewer than GROUP positions after the last whole
    // group never merge with a block before them, so they start a counter of their own.
    (from, prefix) = scan_groups::<T, O, 8>(op, from, prefix, end, kind, io);
    // The last positions, fewer than eight: one by one.
    let c = |a, b| op.combine(a, b);
    let mut stack = PrefixStack::new(prefix);
    let mut v = [op.identity()];
    for i in from..len {
        let q = io.first() + i as u64;
        io.load(op, i, &mut v);
        let p = match kind {
            ScanKind::Exclusive => {
                let p = stack.prefix().unwrap_or_else(|| op.identity());
                stack.push(c, v[0]);
                op.finish(p, q)
            }
            ScanKind::Inclusive => {
                stack.push(c, v[0]);
                let p = match end {
                    Some(e) if i + 1 == len => e,
                    _ => stack.prefix().expect("non-empty after a push"),
                };
                op.finish(p, q + 1)
            }
        };
        io.out(i, 1)[0] = p;
    }
    if io.stream() {
        fence();
    }
}

/// Scans the whole groups of `G` positions (a power of two, at least 2, at most 1024) from
/// position `from` of the run, from the exclusive prefix `base` of the positions before;
/// returns where they stop and the prefix through them. See [`scan_run`].
#[cfg_attr(not(debug_assertions), inline(always))]
fn scan_groups<T: DeviceValue, O: Operator<T>, const G: usize>(
    op: &O,
    from: usize,
    base: Option<O::Acc>,
    end: Option<O::Acc>,
    kind: ScanKind,
    io: &mut impl RunIo<T, O>,
) -> (usize, Option<O::Acc>) {
    let len = io.len();
    let groups = (len - from) / G;
    let mut stack = PrefixStack::new(base);
    if groups == 0 {
        return (from, base);
    }
    // Scratch of the group (`Scratch`), each part starting on a cache line where the
    // accumulator's size allows.
    let mut scratch = vec![op.identity(); 4 * G + 64];
    let pad = scratch.as_ptr().align_offset(64).min(64);
    let (x, rest) = scratch[pad..].split_at_mut(G);
    let (tree, rest) = rest.split_at_mut(G);
    let (left, hi) = rest.split_at_mut(G);
    let s = &mut Scratch { tree, left, hi };
    // The group's outputs, where they are written around the caches.
    let mut staged = zeroed_vec::<O::Out>(if io.stream() { G } else { 0 });
    for g in 0..groups {
        let j = from + g * G;
        io.load(op, j, x);
        let q = stack.prefix();
        let small = group_tree::<T, O, G>(op, x, s);
        stack.push(|a, b| op.combine(a, b), small[0][0]);
        let last = match end {
            Some(e) if j + G == len => e,
            _ => stack.prefix().expect("non-empty after a push"),
        };
        let at = io.first() + j as u64;
        if io.stream() {
            group_prefixes::<T, O, G>(op, s, &small, q, last, kind, at, &mut staged);
            copy_out(io.out(j, G), &staged, true);
        } else {
            group_prefixes::<T, O, G>(op, s, &small, q, last, kind, at, io.out(j, G));
        }
    }
    (from + groups * G, stack.prefix())
}

/// The scratch memory of a group of `G` positions: the levels of its tree above the leaves
/// of at least [`REG`] nodes (`tree`, the level of `s` nodes at `G - 2s`); the left
/// children of every level, leaves included, which are all its prefixes need of the tree
/// (`left`, those of the level of `s` nodes at `G - s`); the prefixes of the levels not in
/// registers (`hi`, the level of `s` nodes at `s`).
struct Scratch<'a, A> {
    tree: &'a mut [A],
    left: &'a mut [A],
    hi: &'a mut [A],
}

/// Runs `$body` with `$s` bound to each of the level sizes `2, 4, ..., 1024` in turn (`up`),
/// or `1024, ..., 4, 2` (`down`): the levels of a group, unrolled, so that every loop over
/// a level has a length the compiler knows (vector loops with no scalar remainder).
macro_rules! each_level {
    (up $s:ident => $body:block) => {
        each_level!(@ $s, $body, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
    };
    (down $s:ident => $body:block) => {
        each_level!(@ $s, $body, 1024, 512, 256, 128, 64, 32, 16, 8, 4, 2)
    };
    (@ $s:ident, $body:block, $($v:literal),*) => {
        $({
            let $s: usize = $v;
            $body
        })*
    };
}

/// The number of nodes of the largest level of a group's tree kept in registers: its
/// levels of at most this many nodes, and their prefixes, are fixed-size arrays, not
/// scratch memory (where each small level, stored by narrow stores and read back by wider
/// loads right after, would wait for its stores to reach the cache).
const REG: usize = 16;

/// The levels of a group's tree of at most [`REG`] nodes, or their prefixes: level `l` (of
/// `2^l` nodes) in `[l][..2^l]`.
type Small<A> = [[A; REG]; 5];

/// The number of nodes of a group's largest level in registers, and its level number.
const fn reg_level(g: usize) -> (usize, usize) {
    let r = if g / 2 < REG { g / 2 } else { REG };
    (r, r.trailing_zeros() as usize)
}

/// The canonical tree over a full group `x`: its levels above the leaves of at least
/// [`REG`] nodes and the left children of the levels below them into `s`, the levels of at
/// most [`REG`] nodes returned (the top in `[0][0]`).
#[cfg_attr(not(debug_assertions), inline(always))]
fn group_tree<T: DeviceValue, O: Operator<T>, const G: usize>(
    op: &O,
    x: &[O::Acc],
    s: &mut Scratch<'_, O::Acc>,
) -> Small<O::Acc> {
    let (r, lr) = reg_level(G);
    each_level!(down n => {
        // The level of n / 2 nodes from the level of n.
        if n <= G && n / 2 >= r {
            let (below, above) = s.tree.split_at_mut(G - n);
            let src = if n == G { &x[..G] } else { &below[G - 2 * n..] };
            let dst = &mut above[..n / 2];
            let left = &mut s.left[G - n..G - n / 2];
            for ((o, l), p) in dst.iter_mut().zip(left).zip(src.chunks_exact(2)) {
                *l = p[0];
                *o = op.combine_full(p[0], p[1]);
            }
        }
    });
    let mut t = [[x[0]; REG]; 5];
    t[lr][..r].copy_from_slice(&s.tree[G - 2 * r..G - r]);
    for l in (0..lr).rev() {
        for k in 0..1 << l {
            t[l][k] = op.combine_full(t[l + 1][2 * k], t[l + 1][2 * k + 1]);
        }
    }
    t
}

/// The outputs of a full group, into `out`, from its tree (`s` and `small`, as
/// [`group_tree`] leaves them): `q` is the prefix before the group, `last` the one through
/// its end (from the counter over the groups), `at` the index of its first position.
///
/// The prefix through position `i` is the left fold of `q` and the aligned blocks of the
/// group up to `i`, largest first: the prefix through the block before `i`'s smallest
/// block, joined with that block's tree node. At odd positions it is the prefix of the
/// level above (the sequence of pairs), at even ones the prefix through the pair before
/// joined with the position. So the levels are filled from the top down, each from the one
/// above it and the left children of its pairs, every combine of a level independent of
/// the others. The last level, the positions' own, goes straight to the outputs.
#[allow(clippy::too_many_arguments)]
#[cfg_attr(not(debug_assertions), inline(always))]
fn group_prefixes<T: DeviceValue, O: Operator<T>, const G: usize>(
    op: &O,
    s: &mut Scratch<'_, O::Acc>,
    small: &Small<O::Acc>,
    q: Option<O::Acc>,
    last: O::Acc,
    kind: ScanKind,
    at: u64,
    out: &mut [O::Out],
) {
    let (r, lr) = reg_level(G);
    // The prefixes of the levels in registers, from the top's (`last`) down;
    // the largest then stored for the levels below.
    let t = small;
    let mut p = [[last; REG]; 5];
    for l in 1..=lr {
        let (above, this) = p.split_at_mut(l);
        let (up, p) = (&above[l - 1], &mut this[0]);
        p[0] = match q {
            Some(q) => op.combine(q, t[l][0]),
            None => t[l][0],
        };
        p[1] = up[0];
        for j in 1..1 << (l - 1) {
            p[2 * j] = op.combine(up[j - 1], t[l][2 * j]);
            p[2 * j + 1] = up[j];
        }
    }
    s.hi[r..2 * r].copy_from_slice(&p[lr][..r]);
    // What comes before the first prefix of a level: `q`, or the identity where there is
    // none (which only the exclusive scan's first output uses).
    let first = q.unwrap_or_else(|| op.identity());
    let none = q.is_none();
    // One closure for every level (one instance of by_chunks for them all).
    let put = |_, _, e, u, o: &mut [_; 2]| *o = [e, u];
    each_level!(up n => {
        // The level of n nodes from the level of n / 2 above it.
        if n < G && n > r {
            let (above, below) = s.hi.split_at_mut(n);
            let up = &above[n / 2..];
            let left = &s.left[G - n..G - n / 2];
            by_chunks(op, none, first, up, left, put, &mut below[..n]);
        }
    });
    let up = &s.hi[G / 2..G];
    let left = &s.left[..G / 2];
    match kind {
        ScanKind::Inclusive => {
            let put = |k, _, e, u, o: &mut [_; 2]| {
                let i = at + 2 * k as u64;
                o[0] = op.finish(e, i + 1);
                o[1] = op.finish(u, i + 2);
            };
            by_chunks(op, none, first, up, left, put, out)
        }
        ScanKind::Exclusive => {
            let put = |k, p, e, _, o: &mut [_; 2]| {
                let i = at + 2 * k as u64;
                o[0] = op.finish(p, i);
                o[1] = op.finish(e, i + 1);
            };
            by_chunks(op, none, first, up, left, put, out)
        }
    }
}

/// Walks the pairs of a level of `2h` prefixes, from the prefixes of the level above (`up`,
/// `h` of them: pair `k`'s is `up[k]`, the one before pair `k` is `up[k - 1]`, or `first`
/// for pair 0) and the left children of the level's pairs (`left`): `put(k, before, e,
/// up[k], outs)` writes the two outputs of pair `k`, `e` being the prefix through its left
/// child, `combine(before, left[k])` (or `left[0]` alone for pair 0 where `none`: there is
/// no prefix before the level). By chunks of fixed size, so that the compiler puts a
/// chunk's combines in vector lanes and interleaves them with the `up`s by shuffles in
/// registers.
#[cfg_attr(not(debug_assertions), inline(always))]
fn by_chunks<T: DeviceValue, O: Operator<T>, U: Copy>(
    op: &O,
    none: bool,
    first: O::Acc,
    up: &[O::Acc],
    left: &[O::Acc],
    put: impl Fn(usize, O::Acc, O::Acc, O::Acc, &mut [U; 2]),
    dst: &mut [U],
) {
    match up.len() {
        1 => chunks::<T, O, U, 1>(op, none, first, up, left, put, dst),
        2 => chunks::<T, O, U, 2>(op, none, first, up, left, put, dst),
        4 => chunks::<T, O, U, 4>(op, none, first, up, left, put, dst),
        8 => chunks::<T, O, U, 8>(op, none, first, up, left, put, dst),
        _ => chunks::<T, O, U, 16>(op, none, first, up, left, put, dst),
    }
}

/// [`by_chunks`] by chunks of `K` pairs (`h` a multiple of `K`). The chunk where the first
/// prefix is a left child alone is a copy of its own, so that the others have the same
/// combine in every lane.
#[cfg_attr(not(debug_assertions), inline(always))]
fn chunks<T: DeviceValue, O: Operator<T>, U: Copy, const K: usize>(
    op: &O,
    none: bool,
    first: O::Acc,
    up: &[O::Acc],
    left: &[O::Acc],
    put: impl Fn(usize, O::Acc, O::Acc, O::Acc, &mut [U; 2]),
    dst: &mut [U],
) {
    let mut before = first;
    for c in 0..up.len() / K {
        before = if none && c == 0 {
            chunk::<T, O, U, K, true>(op, c, before, up, left, &put, dst)
        } else {
            chunk::<T, O, U, K, false>(op, c, before, up, left, &put, dst)
        };
    }
}

/// Chunk `c` of [`chunks`], `before` the prefix before it; returns its last `up`, the
/// prefix before the next chunk. Where `NONE`, the first prefix is `left[0]`. The chunk's
/// values are all read into fixed-size arrays before its outputs are written, and its
/// outputs are written from one, so that the compiler, which cannot tell that the outputs
/// are not the inputs, still may keep them in vector registers; the prefixes before its
/// pairs are the `up`s shifted by one in registers, not a load straddling stores that may
/// not have reached the cache yet.
#[cfg_attr(not(debug_assertions), inline(always))]
fn chunk<T: DeviceValue, O: Operator<T>, U: Copy, const K: usize, const NONE: bool>(
    op: &O,
    c: usize,
    before: O::Acc,
    up: &[O::Acc],
    left: &[O::Acc],
    put: &impl Fn(usize, O::Acc, O::Acc, O::Acc, &mut [U; 2]),
    dst: &mut [U],
) -> O::Acc {
    let next: [O::Acc; K] = up[c * K..][..K].try_into().unwrap();
    let left: [O::Acc; K] = left[c * K..][..K].try_into().unwrap();
    let mut prev = next;
    prev[0] = before;
    prev[1..].copy_from_slice(&next[..K - 1]);
    let mut e = prev;
    for k in 0..K {
        e[k] = if NONE && k == 0 {
            left[0]
        } else {
            op.combine(prev[k], left[k])
        };
    }
    let dst = &mut dst[2 * c * K..][..2 * K];
    let mut outs = [[dst[0]; 2]; K];
    for k in 0..K {
        put(c * K + k, prev[k], e[k], next[k], &mut outs[k]);
    }
    for (d, o) in dst.chunks_exact_mut(2).zip(&outs) {
        d.copy_from_slice(o);
    }
    next[K - 1]
}
