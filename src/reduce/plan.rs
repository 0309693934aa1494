//! The reduction's launch planner: pure functions from (N, sizes, device) to a kernel shape
//! and a launch plan, unit-tested on the CPU.
//!
//! Every reduction kernel combines elements along the canonical tree (crate docs), so the
//! plan changes only the speed, never the bits: a different block size, number of loads per
//! thread or grid gives the same result.

use crate::element::DeviceValue;
use crate::error::{Error, ErrorKind, Result};
use crate::gpu::{check_block, DeviceProps};
use crate::ops::Operator;

/// Compile-time shape of a reduction kernel: one compiled kernel serves every N.
///
/// ```
/// let s = cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap();
/// assert_eq!((s.vec, s.loads, s.tile()), (4, 4, 4096)); // f32: 16-byte loads, 4 per thread
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReduceShape {
    /// Threads per block: a power of two from 32 to 1024.
    pub block: u32,
    /// Contiguous items per thread per load (one 16-byte vector when the input is aligned).
    pub vec: u32,
    /// Loads per thread per tile.
    pub loads: u32,
    /// Loads per thread in the final stage that reduces the per-block partials.
    pub final_loads: u32,
    /// The schedule inside a block: `false`, the canonical tree tile by tile; `true`, for
    /// [order-free](crate::ops::Operator::ORDER_FREE) operators only, one accumulator per
    /// thread over all its loads and one tree at the end (kernels/reduce.cuh `free_run`).
    /// The same positions are read either way, and an order-free operator gives the same
    /// bits in both. Reducers set it from the operator.
    pub order_free: bool,
}

/// Bytes each thread keeps in flight per tile.
const BYTES_IN_FLIGHT: usize = 64;
/// Final-stage loads per thread: the final block reduces up to `block * FINAL_LOADS` partials.
const FINAL_LOADS: u32 = 8;

/// Values of `size` bytes one 16-byte load holds: 16 / size for sizes that tile 16 bytes,
/// else 1 (a value at a time). The kernels' vector loads (`CF_VEC`, `cf::SpanPieces::V`)
/// follow the same rule.
pub(crate) fn per_16_bytes(size: usize) -> usize {
    if size > 0 && size <= 16 && 16 % size == 0 {
        16 / size
    } else {
        1
    }
}

impl ReduceShape {
    /// The shape for input elements of `in_size` bytes and `block` threads per block.
    ///
    /// Errors if `block` is not a power of two in 32..=1024.
    ///
    /// ```
    /// use cufold::reduce::ReduceShape;
    /// assert_eq!(ReduceShape::for_sizes(2, 256).unwrap().vec, 8); // f16: 8 per 16 bytes
    /// assert_eq!(ReduceShape::for_sizes(24, 256).unwrap().vec, 1); // odd-sized structs
    /// assert!(ReduceShape::for_sizes(4, 2048).is_err());
    /// ```
    pub fn for_sizes(in_size: usize, block: u32) -> Result<ReduceShape> {
        check_block(block)?;
        let vec = per_16_bytes(in_size);
        let per_load = vec * in_size.max(1);
        // The largest power of two of loads that keeps at most BYTES_IN_FLIGHT per thread.
        let want = (BYTES_IN_FLIGHT / per_load).clamp(1, 8);
        let loads = 1usize << want.ilog2();
        Ok(ReduceShape {
            block,
            vec: vec as u32,
            loads: loads as u32,
            final_loads: FINAL_LOADS,
            order_free: false,
        })
    }

    /// The shape of `block` threads for operator `O` over elements of type `T`:
    /// [`ReduceShape::for_sizes`] with `O`'s schedule ([`ReduceShape::order_free`]), as every
    /// reducer builds it.
    pub(crate) fn for_operator<T: DeviceValue, O: Operator<T>>(block: u32) -> Result<ReduceShape> {
        Ok(ReduceShape {
            order_free: O::ORDER_FREE,
            ..ReduceShape::for_sizes(std::mem::size_of::<T>(), block)?
        })
    }

    /// Positions one block covers per tile: `block * loads * vec`.
    ///
    /// ```
    /// let s = cufold::reduce::ReduceShape::for_sizes(8, 128).unwrap();
    /// assert_eq!(s.tile(), 128 * 4 * 2);
    /// ```
    pub fn tile(&self) -> u64 {
        self.block as u64 * self.loads as u64 * self.vec as u64
    }

    /// The most partials the final stage reduces: the cap on the grid.
    ///
    /// ```
    /// assert_eq!(cufold::reduce::ReduceShape::for_sizes(4, 256).unwrap().max_grid(), 2048);
    /// ```
    pub fn max_grid(&self) -> u64 {
        self.block as u64 * self.final_loads as u64
    }
}

/// One launch of the reduction kernel.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::reduce::{plan, ReduceShape};
/// let dev = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let shape = ReduceShape::for_sizes(4, 256).unwrap();
/// let small = plan(1000, &shape, &dev).unwrap();
/// assert_eq!((small.grid, small.limit), (1, 1024)); // one block, one launch
/// let big = plan(1 << 28, &shape, &dev).unwrap();
/// assert!(big.grid <= 132 * 8 && big.grid * big.tiles_per_block * shape.tile() >= 1 << 28);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct ReducePlan {
    /// Blocks in the grid (= partials written when more than one).
    pub grid: u64,
    /// Consecutive tiles each block reduces: a power of two, so that a block's run is a
    /// subtree of the canonical tree, unless the shape is
    /// [order-free](ReduceShape::order_free), whose blocks may take any number (the fewest
    /// that fill the wave).
    pub tiles_per_block: u64,
    /// `next_pow2(N)`: no tree node spans more positions.
    pub limit: u64,
}

/// Plans the reduction of `n` elements with a kernel of `shape` on `dev`.
///
/// - N up to one tile: one block, one launch, no temporary storage.
/// - Larger N: one launch of at most one resident wave of blocks (`sm_count *
///   max_threads_per_sm / block`, capped by what the final stage can take), each reducing a
///   power-of-two run of consecutive tiles (any run for an order-free shape, so that its
///   grid fills the wave); the last block to finish reduces the partials.
///   A [`Reducer`](crate::Reducer) passes its kernel's own residency as
///   `max_threads_per_sm` (the blocks its registers and shared memory let a multiprocessor
///   hold, as threads), so that its wave is the kernel's.
///
/// ```
/// use cufold::gpu::DeviceProps;
/// use cufold::reduce::{plan, ReduceShape};
/// let dev = DeviceProps { sm_count: 132, max_threads_per_sm: 2048 };
/// let shape = ReduceShape::for_sizes(4, 256).unwrap();
/// let p = plan(5_000_000_000, &shape, &dev).unwrap(); // past 2^32 is fine
/// assert!(p.tiles_per_block.is_power_of_two());
/// ```
pub fn plan(n: u64, shape: &ReduceShape, dev: &DeviceProps) -> Result<ReducePlan> {
    if n > 1 << 62 {
        return Err(Error::new(
            ErrorKind::TooLarge,
            format!("{n} elements: cufold supports inputs of up to 2^62 elements"),
        ));
    }
    let limit = n.max(1).next_power_of_two();
    let tile = shape.tile();
    if n <= tile {
        return Ok(ReducePlan {
            grid: 1,
            tiles_per_block: 1,
            limit,
        });
    }
    let resident = dev.resident_blocks(shape.block).max(1);
    let cap = resident.min(shape.max_grid());
    let tiles = n.div_ceil(tile);
    let r = if shape.order_free {
        // Any run of tiles gives an order-free operator's bits: the fewest tiles a block
        // that fill the wave.
        tiles.div_ceil(cap)
    } else {
        let mut r = 1u64;
        while tiles.div_ceil(r) > cap {
            r *= 2;
        }
        r
    };
    let grid = tiles.div_ceil(r);
    Ok(ReducePlan {
        grid,
        tiles_per_block: r,
        limit,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const H100: DeviceProps = DeviceProps {
        sm_count: 132,
        max_threads_per_sm: 2048,
    };

    #[test]
    fn shapes_use_16_byte_loads() {
        for (size, vec) in [(1, 16), (2, 8), (4, 4), (8, 2), (16, 1), (32, 1), (12, 1)] {
            let s = ReduceShape::for_sizes(size, 256).unwrap();
            assert_eq!(s.vec, vec, "size {size}");
            assert!(s.loads.is_power_of_two() && s.loads <= 8);
            assert!(s.vec as usize * size * s.loads as usize <= 64 || s.loads == 1);
        }
    }

    #[test]
    fn bad_block_sizes_are_errors() {
        for b in [0, 16, 48, 100, 2048] {
            let e = ReduceShape::for_sizes(4, b).unwrap_err();
            assert_eq!(e.kind(), ErrorKind::InvalidConfig);
            assert!(e.to_string().contains("1024"));
        }
    }

    #[test]
    fn plans_cover_the_input_exactly_once() {
        for block in [32, 128, 256, 1024] {
            for size in [1usize, 2, 4, 8, 16, 32] {
                let s = ReduceShape::for_sizes(size, block).unwrap();
                for n in [
                    0u64,
                    1,
                    2,
                    31,
                    4095,
                    4096,
                    4097,
                    1 << 20,
                    10_000_019,
                    1 << 28,
                    (1 << 32) + 3,
                    1 << 40,
                ] {
                    let p = plan(n, &s, &H100).unwrap();
                    let span = p.grid * p.tiles_per_block * s.tile();
                    assert!(span >= n, "{n}: plan covers {span}");
                    // No block is entirely past the end.
                    assert!((p.grid - 1) * p.tiles_per_block * s.tile() < n.max(1));
                    assert!(p.tiles_per_block.is_power_of_two());
                    assert!(p.grid <= s.max_grid());
                    assert_eq!(p.limit, n.max(1).next_power_of_two());
                    // A block's run of tiles is an aligned subtree of the canonical tree.
                    assert!(p.tiles_per_block * s.tile() <= p.limit || p.grid == 1);
                    if n <= s.tile() {
                        assert_eq!((p.grid, p.tiles_per_block), (1, 1));
                    }
                    // An order-free shape covers the same input with no power of two.
                    let free = ReduceShape {
                        order_free: true,
                        ..s
                    };
                    let q = plan(n, &free, &H100).unwrap();
                    let span = q.grid * q.tiles_per_block * s.tile();
                    assert!(span >= n, "{n}: order-free plan covers {span}");
                    assert!((q.grid - 1) * q.tiles_per_block * s.tile() < n.max(1));
                    assert!(q.grid <= s.max_grid() && q.grid >= p.grid);
                    assert_eq!(q.limit, p.limit);
                }
            }
        }
    }

    #[test]
    fn large_inputs_fill_one_wave() {
        let s = ReduceShape::for_sizes(4, 256).unwrap();
        let p = plan(1 << 28, &s, &H100).unwrap();
        assert!(p.grid > 132 * 8 / 2 && p.grid <= 132 * 8, "{p:?}");
    }

    #[test]
    fn order_free_shapes_fill_the_wave() {
        // 2^28 f32 in tiles of 2048: 131072 tiles, and a kernel that holds five 128-thread
        // blocks an SM: 660 resident. A power of two of tiles a block (256) would leave 512
        // blocks; any number (199) gives 659.
        let s = ReduceShape::for_sizes(4, 128).unwrap();
        let free = ReduceShape {
            order_free: true,
            ..s
        };
        let dev = DeviceProps {
            sm_count: 132,
            max_threads_per_sm: 640,
        };
        let p = plan(1 << 28, &s, &dev).unwrap();
        assert_eq!((p.tiles_per_block, p.grid), (256, 512));
        let p = plan(1 << 28, &free, &dev).unwrap();
        assert_eq!((p.tiles_per_block, p.grid), (199, 659));
    }

    #[test]
    fn huge_inputs_are_errors_not_overflows() {
        let s = ReduceShape::for_sizes(4, 256).unwrap();
        assert_eq!(
            plan(u64::MAX, &s, &H100).unwrap_err().kind(),
            ErrorKind::TooLarge
        );
    }
}
