//! Typed views of little-endian element arrays: the reduction operators applied
//! element-wise over byte buffers, shared by the algorithms and the reference.
//!
//! Buffers stay plain bytes (`&[u8]`, `Bytes`) everywhere else; this module is the one
//! place that reads them as `i32`/`i64`/`f32`/`f64`. [`combine`] is on the hot path of
//! every reduction, so it walks the buffers in fixed-size chunks through one generic
//! inner loop per (type, operator) that the compiler can vectorise, and never allocates.
//! It knows nothing about nodes, collectives or the network.

use crate::spec::{Dtype, ReduceOp};

/// Why two element arrays cannot be combined or read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ElementsError {
    /// The two operands of [`combine`] have different lengths.
    #[error("cannot combine arrays of different lengths: {acc} bytes with {other} bytes")]
    LengthMismatch { acc: usize, other: usize },
    /// The buffer does not hold a whole number of elements.
    #[error("{len} bytes is not a whole number of {dtype} elements ({elem} bytes each)")]
    NotWholeElements { len: usize, dtype: Dtype, elem: usize },
}

/// Number of `dtype` elements in `len` bytes, or an error when `len` is not a whole number
/// of elements.
pub fn element_count(dtype: Dtype, len: usize) -> Result<usize, ElementsError> {
    let elem = dtype.size();
    let count = len / elem;
    if count * elem == len { Ok(count) } else { Err(ElementsError::NotWholeElements { len, dtype, elem }) }
}

/// Element-wise `acc[i] = acc[i] op other[i]` over two little-endian arrays of `dtype`.
///
/// Integers wrap on overflow (sum and product); floats use IEEE `+` and `*`, and
/// `min`/`max` with [`f64::min`]/[`f64::max`] semantics (order-independent for inputs
/// without NaN, which topocomm never generates). Both buffers must have the same length,
/// a whole number of elements; otherwise `acc` is left untouched and an error says why.
pub fn combine(dtype: Dtype, op: ReduceOp, acc: &mut [u8], other: &[u8]) -> Result<(), ElementsError> {
    if acc.len() != other.len() {
        return Err(ElementsError::LengthMismatch { acc: acc.len(), other: other.len() });
    }
    element_count(dtype, acc.len())?;
    match dtype {
        Dtype::I32 => combine_as::<i32>(op, acc, other),
        Dtype::I64 => combine_as::<i64>(op, acc, other),
        Dtype::F32 => combine_as::<f32>(op, acc, other),
        Dtype::F64 => combine_as::<f64>(op, acc, other),
    }
    Ok(())
}

/// The value of one element (`element.len() == dtype.size()`) as an `f64` (exact for
/// `i32`, `f32` and `f64`; `i64` beyond 2^53 rounds).
///
/// # Panics
/// If `element` is not exactly `dtype.size()` bytes long.
pub fn element_to_f64(dtype: Dtype, element: &[u8]) -> f64 {
    match dtype {
        Dtype::I32 => i32::load(element).to_f64(),
        Dtype::I64 => i64::load(element).to_f64(),
        Dtype::F32 => f32::load(element).to_f64(),
        Dtype::F64 => f64::load(element).to_f64(),
    }
}

/// The whole elements of `bytes` as `f64`s, in order (a trailing partial element is
/// skipped). See [`element_to_f64`] for precision.
pub fn iter_f64(dtype: Dtype, bytes: &[u8]) -> impl Iterator<Item = f64> + '_ {
    bytes.chunks_exact(dtype.size()).map(move |e| element_to_f64(dtype, e))
}

/// The whole elements of `bytes` as a vector of `f64`s (for messages, plots and tests).
pub fn to_f64s(dtype: Dtype, bytes: &[u8]) -> Vec<f64> {
    iter_f64(dtype, bytes).collect()
}

/// One element written for people: integers exactly, floats in their shortest
/// round-trip form. A slice of the wrong length (a trailing partial element) is shown as
/// its raw bytes.
pub fn format_element(dtype: Dtype, element: &[u8]) -> String {
    if element.len() != dtype.size() {
        return format!("raw bytes {element:02x?}");
    }
    match dtype {
        Dtype::I32 => i32::load(element).to_string(),
        Dtype::I64 => i64::load(element).to_string(),
        Dtype::F32 => f32::load(element).to_string(),
        Dtype::F64 => f64::load(element).to_string(),
    }
}

/// A fixed-size little-endian element and the four reduction operators on it.
trait Element: Copy {
    /// Bytes per element.
    const SIZE: usize;
    /// Reads one element from exactly `SIZE` bytes.
    fn load(bytes: &[u8]) -> Self;
    /// Writes the element into exactly `SIZE` bytes.
    fn store(self, bytes: &mut [u8]);
    fn reduce_sum(self, other: Self) -> Self;
    fn reduce_prod(self, other: Self) -> Self;
    fn reduce_min(self, other: Self) -> Self;
    fn reduce_max(self, other: Self) -> Self;
    fn to_f64(self) -> f64;
}

macro_rules! element_common {
    ($t:ty) => {
        const SIZE: usize = std::mem::size_of::<$t>();

        #[inline(always)]
        fn load(bytes: &[u8]) -> Self {
            <$t>::from_le_bytes(bytes.try_into().expect("an element is SIZE bytes"))
        }

        #[inline(always)]
        fn store(self, bytes: &mut [u8]) {
            bytes.copy_from_slice(&self.to_le_bytes());
        }

        #[inline(always)]
        fn to_f64(self) -> f64 {
            self as f64
        }
    };
}

macro_rules! integer_element {
    ($t:ty) => {
        impl Element for $t {
            element_common!($t);

            #[inline(always)]
            fn reduce_sum(self, other: Self) -> Self {
                self.wrapping_add(other)
            }

            #[inline(always)]
            fn reduce_prod(self, other: Self) -> Self {
                self.wrapping_mul(other)
            }

            #[inline(always)]
            fn reduce_min(self, other: Self) -> Self {
                Ord::min(self, other)
            }

            #[inline(always)]
            fn reduce_max(self, other: Self) -> Self {
                Ord::max(self, other)
            }
        }
    };
}

macro_rules! float_element {
    ($t:ty) => {
        impl Element for $t {
            element_common!($t);

            #[inline(always)]
            fn reduce_sum(self, other: Self) -> Self {
                self + other
            }

            #[inline(always)]
            fn reduce_prod(self, other: Self) -> Self {
                self * other
            }

            #[inline(always)]
            fn reduce_min(self, other: Self) -> Self {
                <$t>::min(self, other)
            }

            #[inline(always)]
            fn reduce_max(self, other: Self) -> Self {
                <$t>::max(self, other)
            }
        }
    };
}

integer_element!(i32);
integer_element!(i64);
float_element!(f32);
float_element!(f64);

/// Dispatches on the operator once, so each (type, operator) pair gets its own loop.
fn combine_as<E: Element>(op: ReduceOp, acc: &mut [u8], other: &[u8]) {
    match op {
        ReduceOp::Sum => zip_in_place::<E>(acc, other, E::reduce_sum),
        ReduceOp::Prod => zip_in_place::<E>(acc, other, E::reduce_prod),
        ReduceOp::Min => zip_in_place::<E>(acc, other, E::reduce_min),
        ReduceOp::Max => zip_in_place::<E>(acc, other, E::reduce_max),
    }
}

/// The hot loop: fixed-size chunks, no bounds checks left after inlining, no allocation.
#[inline(always)]
fn zip_in_place<E: Element>(acc: &mut [u8], other: &[u8], f: impl Fn(E, E) -> E) {
    for (a, b) in acc.chunks_exact_mut(E::SIZE).zip(other.chunks_exact(E::SIZE)) {
        f(E::load(a), E::load(b)).store(a);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use strum::IntoEnumIterator;

    fn i32s(v: &[i32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn i64s(v: &[i64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f32s(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn f64s(v: &[f64]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }

    fn combined(dtype: Dtype, op: ReduceOp, a: &[u8], b: &[u8]) -> Vec<u8> {
        let mut acc = a.to_vec();
        combine(dtype, op, &mut acc, b).unwrap();
        acc
    }

    #[test]
    fn i32_every_op_by_hand() {
        let a = i32s(&[1, -2, i32::MAX, 7, i32::MIN]);
        let b = i32s(&[3, 5, 2, -7, -1]);
        let t = Dtype::I32;
        assert_eq!(combined(t, ReduceOp::Sum, &a, &b), i32s(&[4, 3, i32::MIN + 1, 0, i32::MAX]));
        assert_eq!(combined(t, ReduceOp::Prod, &a, &b), i32s(&[3, -10, -2, -49, i32::MIN]));
        assert_eq!(combined(t, ReduceOp::Min, &a, &b), i32s(&[1, -2, 2, -7, i32::MIN]));
        assert_eq!(combined(t, ReduceOp::Max, &a, &b), i32s(&[3, 5, i32::MAX, 7, -1]));
    }

    #[test]
    fn i64_every_op_by_hand() {
        let a = i64s(&[1, -2, i64::MAX, 1 << 40]);
        let b = i64s(&[3, 5, 1, 1 << 20]);
        let t = Dtype::I64;
        assert_eq!(combined(t, ReduceOp::Sum, &a, &b), i64s(&[4, 3, i64::MIN, (1 << 40) + (1 << 20)]));
        assert_eq!(combined(t, ReduceOp::Prod, &a, &b), i64s(&[3, -10, i64::MAX, 1 << 60]));
        assert_eq!(combined(t, ReduceOp::Min, &a, &b), i64s(&[1, -2, 1, 1 << 20]));
        assert_eq!(combined(t, ReduceOp::Max, &a, &b), i64s(&[3, 5, i64::MAX, 1 << 40]));
    }

    #[test]
    fn i64_product_wraps() {
        let a = i64s(&[i64::MAX, 1 << 40]);
        let b = i64s(&[2, 1 << 30]);
        // i64::MAX · 2 = 2^64 - 2 ≡ -2, and 2^70 ≡ 0 (mod 2^64).
        assert_eq!(combined(Dtype::I64, ReduceOp::Prod, &a, &b), i64s(&[-2, 0]));
    }

    #[test]
    fn f32_every_op_by_hand() {
        let a = f32s(&[1.5, -2.0, 0.25, 3.0]);
        let b = f32s(&[2.0, 0.5, -4.0, 3.0]);
        let t = Dtype::F32;
        assert_eq!(combined(t, ReduceOp::Sum, &a, &b), f32s(&[3.5, -1.5, -3.75, 6.0]));
        assert_eq!(combined(t, ReduceOp::Prod, &a, &b), f32s(&[3.0, -1.0, -1.0, 9.0]));
        assert_eq!(combined(t, ReduceOp::Min, &a, &b), f32s(&[1.5, -2.0, -4.0, 3.0]));
        assert_eq!(combined(t, ReduceOp::Max, &a, &b), f32s(&[2.0, 0.5, 0.25, 3.0]));
    }

    #[test]
    fn f64_every_op_by_hand() {
        let a = f64s(&[1.5, -2.0, 0.25, 1e300]);
        let b = f64s(&[2.0, 0.5, -4.0, 1e10]);
        let t = Dtype::F64;
        assert_eq!(combined(t, ReduceOp::Sum, &a, &b), f64s(&[3.5, -1.5, -3.75, 1e300 + 1e10]));
        assert_eq!(combined(t, ReduceOp::Prod, &a, &b), f64s(&[3.0, -1.0, -1.0, f64::INFINITY]));
        assert_eq!(combined(t, ReduceOp::Min, &a, &b), f64s(&[1.5, -2.0, -4.0, 1e10]));
        assert_eq!(combined(t, ReduceOp::Max, &a, &b), f64s(&[2.0, 0.5, 0.25, 1e300]));
    }

    #[test]
    fn empty_arrays_combine_to_empty() {
        for dtype in Dtype::iter() {
            for op in ReduceOp::iter() {
                let mut acc = Vec::new();
                combine(dtype, op, &mut acc, &[]).unwrap();
                assert!(acc.is_empty());
            }
        }
    }

    #[test]
    fn refuses_different_lengths() {
        let mut acc = i32s(&[1, 2]);
        let err = combine(Dtype::I32, ReduceOp::Sum, &mut acc, &i32s(&[1])).unwrap_err();
        assert_eq!(err, ElementsError::LengthMismatch { acc: 8, other: 4 });
        assert!(err.to_string().contains("8 bytes with 4 bytes"), "{err}");
        assert_eq!(acc, i32s(&[1, 2]), "acc is untouched on error");
    }

    #[test]
    fn refuses_partial_elements() {
        let mut acc = vec![1u8; 12];
        let err = combine(Dtype::F64, ReduceOp::Max, &mut acc, &[2u8; 12]).unwrap_err();
        assert_eq!(err, ElementsError::NotWholeElements { len: 12, dtype: Dtype::F64, elem: 8 });
        assert!(err.to_string().contains("12 bytes is not a whole number of f64"), "{err}");
        assert_eq!(acc, vec![1u8; 12]);
        // 12 bytes is three whole i32s.
        combine(Dtype::I32, ReduceOp::Max, &mut acc, &[2u8; 12]).unwrap();
    }

    #[test]
    fn counts_and_views() {
        assert_eq!(element_count(Dtype::F32, 12), Ok(3));
        assert_eq!(element_count(Dtype::I64, 0), Ok(0));
        assert!(element_count(Dtype::I64, 12).is_err());
        assert_eq!(to_f64s(Dtype::I32, &i32s(&[-3, 7])), vec![-3.0, 7.0]);
        assert_eq!(to_f64s(Dtype::F32, &f32s(&[0.5, -1.25])), vec![0.5, -1.25]);
        assert_eq!(to_f64s(Dtype::I64, &i64s(&[1 << 40])), vec![(1u64 << 40) as f64]);
        assert_eq!(to_f64s(Dtype::F64, &f64s(&[1e-300])), vec![1e-300]);
        assert_eq!(format_element(Dtype::I64, &i64s(&[i64::MIN])), i64::MIN.to_string());
        assert_eq!(format_element(Dtype::F32, &f32s(&[0.1])), "0.1");
        assert_eq!(format_element(Dtype::F64, &[1, 2]), "raw bytes [01, 02]");
    }

    /// Two equal-length vectors of `T`.
    fn pair<T: Arbitrary + Clone>() -> impl Strategy<Value = (Vec<T>, Vec<T>)> {
        (0usize..48).prop_flat_map(|n| (prop::collection::vec(any::<T>(), n), prop::collection::vec(any::<T>(), n)))
    }

    /// Finite, non-zero floats (signed zeros are the one place `min`/`max` may depend on
    /// the order, and topocomm never generates zeros).
    fn finite_f64s() -> impl Strategy<Value = (Vec<f64>, Vec<f64>)> {
        let x = prop::num::f64::NORMAL | prop::num::f64::SUBNORMAL;
        (0usize..48).prop_flat_map(move |n| (prop::collection::vec(x, n), prop::collection::vec(x, n)))
    }

    fn finite_f32s() -> impl Strategy<Value = (Vec<f32>, Vec<f32>)> {
        let x = prop::num::f32::NORMAL | prop::num::f32::SUBNORMAL;
        (0usize..48).prop_flat_map(move |n| (prop::collection::vec(x, n), prop::collection::vec(x, n)))
    }

    proptest! {
        #[test]
        fn integer_ops_commute_and_match_scalar_i32((a, b) in pair::<i32>()) {
            let (ab, bb) = (i32s(&a), i32s(&b));
            for op in ReduceOp::iter() {
                let x = combined(Dtype::I32, op, &ab, &bb);
                prop_assert_eq!(&x, &combined(Dtype::I32, op, &bb, &ab), "{} commutes", op);
                let scalar: Vec<i32> = a.iter().zip(&b).map(|(&x, &y)| match op {
                    ReduceOp::Sum => x.wrapping_add(y),
                    ReduceOp::Prod => x.wrapping_mul(y),
                    ReduceOp::Min => x.min(y),
                    ReduceOp::Max => x.max(y),
                }).collect();
                prop_assert_eq!(x, i32s(&scalar), "{} matches the scalar op", op);
            }
        }

        #[test]
        fn integer_ops_commute_and_match_scalar_i64((a, b) in pair::<i64>()) {
            let (ab, bb) = (i64s(&a), i64s(&b));
            for op in ReduceOp::iter() {
                let x = combined(Dtype::I64, op, &ab, &bb);
                prop_assert_eq!(&x, &combined(Dtype::I64, op, &bb, &ab), "{} commutes", op);
                let scalar: Vec<i64> = a.iter().zip(&b).map(|(&x, &y)| match op {
                    ReduceOp::Sum => x.wrapping_add(y),
                    ReduceOp::Prod => x.wrapping_mul(y),
                    ReduceOp::Min => x.min(y),
                    ReduceOp::Max => x.max(y),
                }).collect();
                prop_assert_eq!(x, i64s(&scalar), "{} matches the scalar op", op);
            }
        }

        #[test]
        fn integer_ops_associate((a, b) in pair::<i64>(), seed in any::<i64>()) {
            let c: Vec<i64> = a.iter().map(|x| x ^ seed).collect();
            let (ab, bb, cb) = (i64s(&a), i64s(&b), i64s(&c));
            for op in ReduceOp::iter() {
                let left = combined(Dtype::I64, op, &combined(Dtype::I64, op, &ab, &bb), &cb);
                let right = combined(Dtype::I64, op, &ab, &combined(Dtype::I64, op, &bb, &cb));
                prop_assert_eq!(left, right, "{} associates", op);
            }
        }

        #[test]
        fn float_min_max_are_exact_and_commute_f64((a, b) in finite_f64s()) {
            let (ab, bb) = (f64s(&a), f64s(&b));
            let min = combined(Dtype::F64, ReduceOp::Min, &ab, &bb);
            let max = combined(Dtype::F64, ReduceOp::Max, &ab, &bb);
            prop_assert_eq!(&min, &combined(Dtype::F64, ReduceOp::Min, &bb, &ab));
            prop_assert_eq!(&max, &combined(Dtype::F64, ReduceOp::Max, &bb, &ab));
            let lo: Vec<f64> = a.iter().zip(&b).map(|(x, y)| if x <= y { *x } else { *y }).collect();
            let hi: Vec<f64> = a.iter().zip(&b).map(|(x, y)| if x >= y { *x } else { *y }).collect();
            prop_assert_eq!(min, f64s(&lo));
            prop_assert_eq!(max, f64s(&hi));
        }

        #[test]
        fn float_min_max_are_exact_and_commute_f32((a, b) in finite_f32s()) {
            let (ab, bb) = (f32s(&a), f32s(&b));
            let min = combined(Dtype::F32, ReduceOp::Min, &ab, &bb);
            let max = combined(Dtype::F32, ReduceOp::Max, &ab, &bb);
            prop_assert_eq!(&min, &combined(Dtype::F32, ReduceOp::Min, &bb, &ab));
            prop_assert_eq!(&max, &combined(Dtype::F32, ReduceOp::Max, &bb, &ab));
            let lo: Vec<f32> = a.iter().zip(&b).map(|(x, y)| if x <= y { *x } else { *y }).collect();
            let hi: Vec<f32> = a.iter().zip(&b).map(|(x, y)| if x >= y { *x } else { *y }).collect();
            prop_assert_eq!(min, f32s(&lo));
            prop_assert_eq!(max, f32s(&hi));
        }

        #[test]
        fn float_sum_prod_match_scalar_ieee((a, b) in finite_f64s()) {
            let (ab, bb) = (f64s(&a), f64s(&b));
            let sum: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
            let prod: Vec<f64> = a.iter().zip(&b).map(|(x, y)| x * y).collect();
            prop_assert_eq!(combined(Dtype::F64, ReduceOp::Sum, &ab, &bb), f64s(&sum));
            prop_assert_eq!(combined(Dtype::F64, ReduceOp::Prod, &ab, &bb), f64s(&prod));
        }
    }
}
