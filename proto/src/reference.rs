//! The sequential semantics of every collective: deterministic inputs from (seed, node),
//! what each node must end with, and the check (with its floating-point tolerance) that
//! a node's result is right.
//!
//! Nodes call [`input`] to get what they start with, and [`check`] (or
//! [`Expected::check`]) on what they end with; the coordinator can hold a node's
//! [`digest`] against the digest of [`expected`] when the tolerance is exact. Each
//! collective is one arm of a `match spec.collective` in [`input`] and [`expected`].
//! Nothing here knows about topologies, algorithms or the network: the reference is the
//! answer, however it was reached.
//!
//! # Inputs
//!
//! [`node_vector`] is `spec.size_bytes` bytes from ChaCha8 seeded with `spec.seed` on
//! stream `node`. Integers are full-range random; floats have a magnitude uniform in
//! [0.5, 2) and a random sign, so a product over up to ~100 nodes stays a normal number
//! even in `f32`, and no value is zero or NaN.
//!
//! # Tolerance
//!
//! Integer results (wrapping arithmetic) and float `min`/`max` must match bit for bit.
//! Float `sum` and `prod` may be computed in any order and grouping, so element `i` of a
//! result may differ from the reference (the reduction in node order 0..p-1) by at most
//!
//! * sum: `2 · (p - 1) · eps · Σ_k |x_k[i]|`,
//! * prod: `2 · 2 · (p - 1) · eps · |expected[i]|`,
//!
//! with `eps` the machine epsilon of the element type (`f32::EPSILON` or `f64::EPSILON`)
//! and `x_k` node `k`'s vector, computed per element in `f64` while the reference is
//! built. `(p - 1) · eps` is the standard first-order bound of `p - 1` roundings, `2 ·
//! (p - 1) · u` with unit roundoff `u = eps / 2`, so it already covers the rounding of
//! both the node's result and the reference; the leading factor 2 is extra slack on top.

use std::collections::TryReserveError;

use bytes::Bytes;
use rand_chacha::ChaCha8Rng;
use rand_chacha::rand_core::{RngCore, SeedableRng};

use crate::elements::{self, combine, format_element, iter_f64};
use crate::spec::{Collective, Dtype, ReduceOp, RunSpec};
use crate::topology::NodeId;

/// Extra factor on top of the first-order rounding-error bounds (see the module docs).
pub const TOLERANCE_SLACK: f64 = 2.0;

/// The deterministic vector of node `node`: `spec.size_bytes` bytes of little-endian
/// `spec.dtype` elements drawn from ChaCha8 seeded with `spec.seed` on stream `node`.
/// Integers are full-range; floats have a magnitude uniform in [0.5, 2) and a random sign.
pub fn node_vector(spec: &RunSpec, node: NodeId) -> Vec<u8> {
    node_data(spec, node, 0, spec.size_bytes as usize)
}

/// `len` bytes of node `node`'s element stream from byte `offset` (a multiple of 4, so
/// any block boundary of whole elements): the generator seeks there, so a block costs
/// only its own length.
pub fn node_data(spec: &RunSpec, node: NodeId, offset: usize, len: usize) -> Vec<u8> {
    let mut bytes = vec![0u8; len];
    fill_node_data(spec, node, offset, &mut bytes);
    bytes
}

/// Fills `bytes` with node `node`'s element stream from byte `offset` (see [`node_data`]).
fn fill_node_data(spec: &RunSpec, node: NodeId, offset: usize, bytes: &mut [u8]) {
    debug_assert!(offset.is_multiple_of(4), "offset {offset} is not word-aligned");
    let mut rng = ChaCha8Rng::seed_from_u64(spec.seed);
    rng.set_stream(node as u64);
    rng.set_word_pos((offset / 4) as u128);
    rng.fill_bytes(bytes);
    match spec.dtype {
        Dtype::I32 | Dtype::I64 => {}
        Dtype::F32 => {
            for e in bytes.chunks_exact_mut(4) {
                let bits = u32::from_le_bytes(e.try_into().expect("4 bytes"));
                // Top 24 bits: the magnitude; bit 0: the sign.
                let unit = (bits >> 8) as f64 * (1.0 / (1u64 << 24) as f64);
                let magnitude = (0.5 + 1.5 * unit) as f32;
                let value = if bits & 1 == 1 { -magnitude } else { magnitude };
                e.copy_from_slice(&value.to_le_bytes());
            }
        }
        Dtype::F64 => {
            for e in bytes.chunks_exact_mut(8) {
                let bits = u64::from_le_bytes(e.try_into().expect("8 bytes"));
                // Top 53 bits: the magnitude; bit 0: the sign.
                let unit = (bits >> 11) as f64 * (1.0 / (1u64 << 53) as f64);
                let magnitude = 0.5 + 1.5 * unit;
                let value = if bits & 1 == 1 { -magnitude } else { magnitude };
                e.copy_from_slice(&value.to_le_bytes());
            }
        }
    }
}

/// What node `node` of a `p`-node run starts with (`size` is `spec.size_bytes`).
///
/// * Broadcast: the root holds `node_vector(root)`, every other node nothing.
/// * Scatter: the root holds p blocks of `size` (block i for node i), every other node nothing.
/// * Reduce-scatter, alltoall: every node holds p blocks of `size` (block i for node i).
/// * Barrier: nothing.
/// * Every other collective: every node holds its own `node_vector(node)`.
pub fn input(spec: &RunSpec, p: usize, node: NodeId) -> Bytes {
    try_input(spec, p, node).expect("memory for the input")
}

/// [`input`], failing instead of aborting the process when its memory cannot be had.
pub fn try_input(spec: &RunSpec, p: usize, node: NodeId) -> Result<Bytes, TryReserveError> {
    // Every shape is a prefix of the node's stream: nothing, one block or p blocks.
    let len = input_len(spec, p, node);
    let mut bytes = Vec::new();
    bytes.try_reserve_exact(len)?;
    bytes.resize(len, 0);
    fill_node_data(spec, node, 0, &mut bytes);
    Ok(bytes.into())
}

/// The length in bytes of what node `node` starts with (see [`input`]), without
/// generating it.
pub fn input_len(spec: &RunSpec, p: usize, node: NodeId) -> usize {
    let size = spec.size_bytes as usize;
    match input_shape(spec, p, node) {
        InputShape::Nothing => 0,
        InputShape::Vector => size,
        // Saturating: a length past the address space is then refused by `try_input`.
        InputShape::Blocks => p.saturating_mul(size),
    }
}

/// What a node starts with: nothing, its own vector, or its p blocks.
enum InputShape {
    Nothing,
    Vector,
    Blocks,
}

fn input_shape(spec: &RunSpec, p: usize, node: NodeId) -> InputShape {
    debug_assert!(node < p, "node {node} is not one of {p} nodes");
    match spec.collective {
        Collective::Broadcast | Collective::PingPong if node == spec.root => InputShape::Vector,
        Collective::Scatter if node == spec.root => InputShape::Blocks,
        Collective::Broadcast | Collective::Scatter | Collective::Barrier | Collective::PingPong => InputShape::Nothing,
        Collective::ReduceScatter | Collective::Alltoall => InputShape::Blocks,
        Collective::Reduce
        | Collective::Allgather
        | Collective::Allreduce
        | Collective::Scan
        | Collective::Gather
        | Collective::Shift => InputShape::Vector,
    }
}

/// How far a node's result may be from the reference, element by element.
#[derive(Debug, Clone, PartialEq)]
pub enum Tolerance {
    /// Every byte must match.
    Exact,
    /// Element `i` may differ from the reference by at most `bounds[i]` (absolute, in
    /// `f64`); one bound per whole element of the reference.
    PerElement(Vec<f64>),
}

/// What a node must end with: the reference bytes and how closely they must be matched.
#[derive(Debug, Clone, PartialEq)]
pub struct Expected {
    /// The element type, for reading and printing the bytes.
    pub dtype: Dtype,
    /// The reference result (little-endian elements of `dtype`).
    pub bytes: Vec<u8>,
    /// How closely `bytes` must be matched.
    pub tolerance: Tolerance,
}

impl Expected {
    /// A result that must match `bytes` exactly.
    pub fn exact(dtype: Dtype, bytes: Vec<u8>) -> Self {
        Expected { dtype, bytes, tolerance: Tolerance::Exact }
    }

    /// Appends `more` (of the same type) to this result, with its tolerance.
    fn append(&mut self, more: Expected) {
        let elements = |e: &Expected| e.bytes.len().div_ceil(e.dtype.size());
        let bounds = |e: &Expected| match &e.tolerance {
            Tolerance::Exact => vec![0.0; elements(e)],
            Tolerance::PerElement(bounds) => bounds.clone(),
        };
        self.tolerance = match (&self.tolerance, &more.tolerance) {
            (Tolerance::Exact, Tolerance::Exact) => Tolerance::Exact,
            _ => Tolerance::PerElement([bounds(self), bounds(&more)].concat()),
        };
        self.bytes.extend_from_slice(&more.bytes);
    }

    /// The tolerance of element `index` (0 for an exact match).
    pub fn tolerance_of(&self, index: usize) -> f64 {
        match &self.tolerance {
            Tolerance::Exact => 0.0,
            Tolerance::PerElement(bounds) => bounds.get(index).copied().unwrap_or(0.0),
        }
    }

    /// Holds a node's output against the reference.
    pub fn check(&self, output: &[u8]) -> Result<(), Mismatch> {
        if output.len() != self.bytes.len() {
            return Err(Mismatch::Length { got: output.len(), expected: self.bytes.len() });
        }
        if output == self.bytes.as_slice() {
            return Ok(());
        }
        let size = self.dtype.size();
        let mut differing = 0;
        let mut first = None;
        let pairs = output.chunks(size).zip(self.bytes.chunks(size));
        let total = pairs.len();
        for (index, (got, want)) in pairs.enumerate() {
            if !self.element_ok(index, got, want) {
                differing += 1;
                first.get_or_insert((index, got, want));
            }
        }
        match first {
            None => Ok(()),
            Some((index, got, want)) => Err(Mismatch::Elements {
                differing,
                total,
                first: index,
                got: format_element(self.dtype, got),
                expected: format_element(self.dtype, want),
                tolerance: self.tolerance_of(index),
            }),
        }
    }

    fn element_ok(&self, index: usize, got: &[u8], want: &[u8]) -> bool {
        if got == want {
            return true;
        }
        match &self.tolerance {
            Tolerance::PerElement(bounds) if got.len() == self.dtype.size() => {
                let diff = elements::element_to_f64(self.dtype, got) - elements::element_to_f64(self.dtype, want);
                // A NaN difference is never within tolerance.
                diff.abs() <= bounds.get(index).copied().unwrap_or(0.0)
            }
            _ => false,
        }
    }
}

/// How a node's result differs from the reference.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Mismatch {
    /// The result has the wrong length.
    #[error("length differs: got {got} bytes, expected {expected}")]
    Length { got: usize, expected: usize },
    /// Some elements are out of tolerance; `first` is the index of the first of them.
    #[error(
        "{differing} of {total} elements differ; first at element {first}: got {got}, expected {expected} ({})",
        describe_tolerance(.tolerance)
    )]
    Elements { differing: usize, total: usize, first: usize, got: String, expected: String, tolerance: f64 },
}

fn describe_tolerance(tolerance: &f64) -> String {
    if *tolerance == 0.0 { "must match exactly".to_owned() } else { format!("tolerance {tolerance:.3e}") }
}

/// What node `node` of a `p`-node run must end with. Reductions are computed in node
/// order (see the module docs for the float tolerance); "nothing" is an empty buffer.
///
/// * Broadcast: the root's vector, on every node.
/// * Reduce: at the root, the reduction of every node's vector; nothing elsewhere.
/// * Allreduce: the reduction of every node's vector, on every node.
/// * Scan: node i, the reduction of the vectors of nodes 0..=i (0..i when exclusive;
///   node 0 then ends with nothing).
/// * Allgather: every node's vector, in node order, on every node.
/// * Gather: at the root, every node's vector in node order; nothing elsewhere.
/// * Reduce-scatter: node i, the reduction of every node's block i.
/// * Scatter: node i, the root's block i.
/// * Alltoall: node i, block i of every node, in node order.
/// * Shift: node i, the vector of node (i - q) mod p.
/// * Barrier: nothing.
/// * Ping-pong: the root and node root + q mod p, the root's vector; nothing elsewhere.
///
/// A spec whose size is not a whole number of elements (refused by
/// [`RunSpec::validate`]) reduces its whole elements only.
pub fn expected(spec: &RunSpec, p: usize, node: NodeId) -> Expected {
    let mut whole = Expected::exact(spec.dtype, Vec::new());
    for segment in segments(spec, p, node) {
        whole.append(segment.expected(spec, 0, segment.len));
    }
    whole
}

/// Holds node `node`'s output of a `p`-node run against [`expected`], a piece at a time:
/// the reference is never built whole, so checking a large result costs little memory.
pub fn check(spec: &RunSpec, p: usize, node: NodeId, output: &[u8]) -> Result<(), Mismatch> {
    let segments = segments(spec, p, node);
    let expected_len: usize = segments.iter().map(|segment| segment.len).sum();
    if output.len() != expected_len {
        return Err(Mismatch::Length { got: output.len(), expected: expected_len });
    }
    let size = spec.dtype.size();
    let (mut at, mut differing, mut first) = (0, 0, None);
    for segment in &segments {
        for start in (0..segment.len).step_by(CHECK_PIECE) {
            let len = CHECK_PIECE.min(segment.len - start);
            if let Err(Mismatch::Elements { differing: here, first: index, got, expected, tolerance, .. }) =
                segment.expected(spec, start, len).check(&output[at..at + len])
            {
                differing += here;
                first.get_or_insert((at / size + index, got, expected, tolerance));
            }
            at += len;
        }
    }
    match first {
        None => Ok(()),
        Some((first, got, expected, tolerance)) => {
            Err(Mismatch::Elements { differing, total: output.len().div_ceil(size), first, got, expected, tolerance })
        }
    }
}

/// Bytes of the reference [`check`] builds at a time (a multiple of every element size).
const CHECK_PIECE: usize = 1 << 20;

/// One part of a node's expected result: `len` bytes from each of `sources` (a node and
/// a byte offset into its stream), reduced element-wise in the order given when there
/// are several.
struct Segment {
    sources: Vec<(NodeId, usize)>,
    len: usize,
}

impl Segment {
    /// Bytes `start .. start + len` of this part (`start` a multiple of [`CHECK_PIECE`]).
    fn expected(&self, spec: &RunSpec, start: usize, len: usize) -> Expected {
        let mut pieces = self.sources.iter().map(|&(node, offset)| node_data(spec, node, offset + start, len));
        match self.sources.len() {
            1 => Expected::exact(spec.dtype, pieces.next().expect("one source")),
            _ => reduction(spec, pieces),
        }
    }
}

/// The parts of what node `node` must end with, in order (see [`expected`]).
fn segments(spec: &RunSpec, p: usize, node: NodeId) -> Vec<Segment> {
    debug_assert!(node < p, "node {node} is not one of {p} nodes");
    let size = spec.size_bytes as usize;
    let part = |sources: Vec<(NodeId, usize)>| Segment { sources, len: size };
    // Block `block` of node `k`.
    let one = |k: NodeId, block: usize| vec![part(vec![(k, block * size)])];
    // The reduction of block `block` of each of `nodes`.
    let reduced = |nodes: std::ops::Range<NodeId>, block: usize| vec![part(nodes.map(|k| (k, block * size)).collect())];
    // Block `block` of each node, one after another.
    let gathered = |block: usize| (0..p).map(|k| part(vec![(k, block * size)])).collect();
    match spec.collective {
        Collective::Broadcast => one(spec.root, 0),
        Collective::Reduce if node == spec.root => reduced(0..p, 0),
        Collective::Allreduce => reduced(0..p, 0),
        Collective::Scan if spec.exclusive && node == 0 => Vec::new(),
        Collective::Scan if spec.exclusive => reduced(0..node, 0),
        Collective::Scan => reduced(0..node + 1, 0),
        Collective::Allgather => gathered(0),
        Collective::Gather if node == spec.root => gathered(0),
        Collective::ReduceScatter => reduced(0..p, node),
        Collective::Scatter => one(spec.root, node),
        Collective::Alltoall => gathered(node),
        Collective::Shift => one((node + p - spec.shift % p) % p, 0),
        Collective::PingPong if node == spec.root || node == (spec.root + spec.shift) % p => one(spec.root, 0),
        Collective::Reduce | Collective::Gather | Collective::Barrier | Collective::PingPong => Vec::new(),
    }
}

/// The xxh3 digest of a node's result, as reported to the coordinator.
pub fn digest(bytes: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(bytes)
}

/// The element-wise reduction of `vectors` (at least one), in the order given, with
/// its tolerance.
fn reduction(spec: &RunSpec, mut vectors: impl Iterator<Item = Vec<u8>>) -> Expected {
    let (dtype, op) = (spec.dtype, spec.op);
    let float_sum = dtype.is_float() && op == ReduceOp::Sum;
    let mut acc = vectors.next().expect("a reduction of at least one vector");
    let whole = acc.len() / dtype.size() * dtype.size();
    // Σ_k |x_k[i]|, only needed for float sums.
    let mut magnitudes: Vec<f64> = if float_sum { iter_f64(dtype, &acc).map(f64::abs).collect() } else { Vec::new() };
    let mut count = 1usize;
    for x in vectors {
        count += 1;
        if float_sum {
            for (m, v) in magnitudes.iter_mut().zip(iter_f64(dtype, &x)) {
                *m += v.abs();
            }
        }
        combine(dtype, op, &mut acc[..whole], &x[..whole])
            .expect("vectors of one spec have equal lengths of whole elements");
    }
    let p = count;
    let eps = match dtype {
        Dtype::F32 => f64::from(f32::EPSILON),
        _ => f64::EPSILON,
    };
    let roundings = p.saturating_sub(1) as f64;
    let tolerance = match op {
        _ if !dtype.is_float() => Tolerance::Exact,
        ReduceOp::Min | ReduceOp::Max => Tolerance::Exact,
        ReduceOp::Sum => {
            let scale = TOLERANCE_SLACK * roundings * eps;
            Tolerance::PerElement(magnitudes.into_iter().map(|m| scale * m).collect())
        }
        ReduceOp::Prod => {
            let scale = TOLERANCE_SLACK * 2.0 * roundings * eps;
            Tolerance::PerElement(iter_f64(dtype, &acc).map(|v| scale * v.abs()).collect())
        }
    };
    Expected { dtype, bytes: acc, tolerance }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::spec::Algorithm;
    use strum::IntoEnumIterator;

    fn spec(collective: Collective, dtype: Dtype, op: ReduceOp, size: u64, root: NodeId) -> RunSpec {
        RunSpec {
            run: 7,
            root,
            size_bytes: size,
            dtype,
            op,
            seed: 0x5eed,
            ..RunSpec::new(collective, Algorithm::Linear)
        }
    }

    /// The reduction of every node's input in reverse node order p-1..0.
    fn reverse_fold(spec: &RunSpec, p: usize) -> Vec<u8> {
        let mut acc = input(spec, p, p - 1).to_vec();
        for node in (0..p - 1).rev() {
            combine(spec.dtype, spec.op, &mut acc, &input(spec, p, node)).unwrap();
        }
        acc
    }

    /// Changes element `index` of `bytes` by a lot.
    fn spoil(dtype: Dtype, bytes: &mut [u8], index: usize) {
        let e = &mut bytes[index * dtype.size()..(index + 1) * dtype.size()];
        match dtype {
            Dtype::I32 => {
                let v = i32::from_le_bytes(e.try_into().unwrap()).wrapping_add(1 << 20);
                e.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::I64 => {
                let v = i64::from_le_bytes(e.try_into().unwrap()).wrapping_add(1 << 40);
                e.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::F32 => {
                let v = f32::from_le_bytes(e.try_into().unwrap()) * 3.0 + 10.0;
                e.copy_from_slice(&v.to_le_bytes());
            }
            Dtype::F64 => {
                let v = f64::from_le_bytes(e.try_into().unwrap()) * 3.0 + 10.0;
                e.copy_from_slice(&v.to_le_bytes());
            }
        }
    }

    #[test]
    fn reduce_matches_a_reverse_fold_for_every_type_op_and_size() {
        for p in 1..=17 {
            let root = 2 * p / 3;
            for dtype in Dtype::iter() {
                for op in ReduceOp::iter() {
                    for size in [0u64, 4, 8, 12] {
                        let s = spec(Collective::Reduce, dtype, op, size, root);
                        if elements::element_count(dtype, size as usize).is_err() {
                            assert!(s.validate(p).is_err(), "{size} bytes is not whole {dtype}s");
                            continue;
                        }
                        s.validate(p).unwrap();
                        assert_eq!(input(&s, p, root), node_vector(&s, root));
                        let rev = reverse_fold(&s, p);
                        if let Err(m) = check(&s, p, root, &rev) {
                            panic!("p={p} {dtype} {op} size {size}: {m}");
                        }
                        for node in (0..p).filter(|&n| n != root) {
                            assert_eq!(input(&s, p, node), node_vector(&s, node));
                            check(&s, p, node, &[]).unwrap();
                        }
                    }
                }
            }
        }
    }

    #[test]
    fn large_float_reductions_stay_within_tolerance() {
        for (dtype, op, p) in
            [(Dtype::F32, ReduceOp::Sum, 17), (Dtype::F32, ReduceOp::Prod, 9), (Dtype::F64, ReduceOp::Sum, 5)]
        {
            let s = spec(Collective::Reduce, dtype, op, 1 << 20, 2);
            let exp = expected(&s, p, 2);
            assert_eq!(exp.bytes.len(), 1 << 20);
            assert!(matches!(&exp.tolerance, Tolerance::PerElement(b) if b.len() == s.elements()));
            let rev = reverse_fold(&s, p);
            if dtype == Dtype::F32 {
                assert_ne!(rev, exp.bytes, "a reverse f32 fold rounds differently somewhere");
            }
            if let Err(m) = exp.check(&rev) {
                panic!("{dtype} {op} p={p}: {m}");
            }
        }
    }

    #[test]
    fn reduce_at_the_root_is_the_node_order_fold() {
        let s = spec(Collective::Reduce, Dtype::F64, ReduceOp::Sum, 24, 1);
        let mut acc = node_vector(&s, 0);
        for node in 1..3 {
            combine(s.dtype, s.op, &mut acc, &node_vector(&s, node)).unwrap();
        }
        assert_eq!(expected(&s, 3, 1).bytes, acc);
        assert_eq!(expected(&s, 3, 0), Expected::exact(Dtype::F64, Vec::new()));
    }

    #[test]
    fn tolerances_follow_the_bounds() {
        let p = 4;
        let s = spec(Collective::Reduce, Dtype::F32, ReduceOp::Sum, 16, 0);
        let Tolerance::PerElement(bounds) = expected(&s, p, 0).tolerance else {
            panic!("float sums have per-element tolerances")
        };
        let vectors: Vec<Vec<f64>> = (0..p).map(|n| elements::to_f64s(s.dtype, &node_vector(&s, n))).collect();
        for (i, bound) in bounds.iter().enumerate() {
            let magnitude: f64 = vectors.iter().map(|v| v[i].abs()).sum();
            let want = 2.0 * 3.0 * f64::from(f32::EPSILON) * magnitude;
            assert!((bound - want).abs() <= 1e-12 * want, "{bound} vs {want}");
        }
        let prod = spec(Collective::Reduce, Dtype::F64, ReduceOp::Prod, 16, 0);
        let exp = expected(&prod, p, 0);
        for (i, v) in elements::to_f64s(Dtype::F64, &exp.bytes).iter().enumerate() {
            assert_eq!(exp.tolerance_of(i), 2.0 * 2.0 * 3.0 * f64::EPSILON * v.abs());
        }
        for (dtype, op) in [(Dtype::F64, ReduceOp::Min), (Dtype::F32, ReduceOp::Max), (Dtype::I32, ReduceOp::Sum)] {
            let exact = spec(Collective::Reduce, dtype, op, 16, 0);
            assert_eq!(expected(&exact, p, 0).tolerance, Tolerance::Exact);
        }
        // One node: nothing is rounded, so nothing may differ.
        assert_eq!(expected(&s, 1, 0).tolerance, Tolerance::Exact);
    }

    #[test]
    fn float_tolerance_is_a_boundary() {
        let p = 17;
        let s = spec(Collective::Reduce, Dtype::F64, ReduceOp::Sum, 64, 0);
        let exp = expected(&s, p, 0);
        let values = elements::to_f64s(Dtype::F64, &exp.bytes);
        for (i, v) in values.iter().enumerate() {
            let tol = exp.tolerance_of(i);
            assert!(tol > 0.0);
            let mut out = exp.bytes.clone();
            out[i * 8..i * 8 + 8].copy_from_slice(&(v + 0.5 * tol).to_le_bytes());
            exp.check(&out).unwrap();
            out[i * 8..i * 8 + 8].copy_from_slice(&(v - 2.0 * tol).to_le_bytes());
            let err = exp.check(&out).unwrap_err().to_string();
            assert!(err.contains(&format!("first at element {i}:")), "{err}");
        }
    }

    #[test]
    fn broadcast_moves_the_roots_vector_everywhere() {
        let p = 6;
        for dtype in Dtype::iter() {
            let s = spec(Collective::Broadcast, dtype, ReduceOp::Sum, 64, 4);
            let root_vector = node_vector(&s, 4);
            for node in 0..p {
                let want: &[u8] = if node == 4 { &root_vector } else { &[] };
                assert_eq!(input(&s, p, node), want);
                assert_eq!(expected(&s, p, node), Expected::exact(dtype, root_vector.clone()));
                check(&s, p, node, &root_vector).unwrap();
            }
        }
    }

    #[test]
    fn check_names_the_first_spoiled_element() {
        let p = 5;
        for dtype in Dtype::iter() {
            for op in ReduceOp::iter() {
                let s = spec(Collective::Reduce, dtype, op, 8 * dtype.size() as u64, 3);
                let mut out = expected(&s, p, 3).bytes;
                spoil(dtype, &mut out, 6);
                let err = check(&s, p, 3, &out).unwrap_err();
                assert!(matches!(err, Mismatch::Elements { differing: 1, total: 8, first: 6, .. }), "{err:?}");
                let msg = err.to_string();
                assert!(msg.starts_with("1 of 8 elements differ; first at element 6: got "), "{msg}");
                spoil(dtype, &mut out, 2);
                let msg = check(&s, p, 3, &out).unwrap_err().to_string();
                assert!(msg.starts_with("2 of 8 elements differ; first at element 2"), "{msg}");
            }
        }
    }

    #[test]
    fn check_goes_piece_by_piece_and_counts_across_pieces() {
        // 2.5 pieces per block: a result of several segments, each of several pieces.
        let size = (CHECK_PIECE * 5 / 2) as u64;
        let p = 3;
        for collective in [Collective::Allreduce, Collective::Alltoall, Collective::ReduceScatter] {
            let s = spec(collective, Dtype::F64, ReduceOp::Sum, size, 0);
            let mut out = expected(&s, p, 1).bytes;
            assert_eq!(check(&s, p, 1, &out), Ok(()), "{collective:?}");
            let total = out.len() / 8;
            // One element in the second piece, one in the last.
            let (second, last) = (CHECK_PIECE / 8 + 5, total - 1);
            spoil(Dtype::F64, &mut out, last);
            spoil(Dtype::F64, &mut out, second);
            let err = check(&s, p, 1, &out).unwrap_err();
            assert!(
                matches!(err, Mismatch::Elements { differing: 2, first, total: t, .. } if first == second && t == total),
                "{collective:?}: {err:?}"
            );
        }
    }

    #[test]
    fn check_message_shows_values_and_tolerance() {
        let s = spec(Collective::Broadcast, Dtype::I32, ReduceOp::Sum, 8, 0);
        let mut out = node_vector(&s, 0);
        let want = i32::from_le_bytes(out[4..8].try_into().unwrap());
        out[4..8].copy_from_slice(&want.wrapping_add(1).to_le_bytes());
        let msg = check(&s, 2, 1, &out).unwrap_err().to_string();
        assert_eq!(
            msg,
            format!(
                "1 of 2 elements differ; first at element 1: got {}, expected {want} (must match exactly)",
                want.wrapping_add(1)
            )
        );
        let f = spec(Collective::Reduce, Dtype::F64, ReduceOp::Sum, 8, 0);
        let exp = expected(&f, 3, 0);
        let msg = exp.check(&f64::NAN.to_le_bytes()).unwrap_err().to_string();
        assert!(msg.contains("got NaN, expected "), "{msg}");
        assert!(msg.contains("(tolerance "), "{msg}");
    }

    #[test]
    fn check_refuses_other_lengths() {
        let s = spec(Collective::Reduce, Dtype::F32, ReduceOp::Max, 12, 0);
        let good = expected(&s, 3, 0).bytes;
        let err = check(&s, 3, 0, &good[..8]).unwrap_err();
        assert_eq!(err, Mismatch::Length { got: 8, expected: 12 });
        assert_eq!(err.to_string(), "length differs: got 8 bytes, expected 12");
        let mut longer = good.clone();
        longer.push(0);
        assert!(check(&s, 3, 0, &longer).unwrap_err().to_string().contains("got 13 bytes, expected 12"));
        let err = check(&s, 3, 1, &good).unwrap_err();
        assert_eq!(err.to_string(), "length differs: got 12 bytes, expected 0");
    }

    #[test]
    fn inputs_are_deterministic() {
        for dtype in Dtype::iter() {
            let s = spec(Collective::Reduce, dtype, ReduceOp::Sum, 256, 0);
            let v = node_vector(&s, 3);
            assert_eq!(v.len(), 256);
            assert_eq!(v, node_vector(&s.clone(), 3));
            assert_eq!(input(&s, 8, 3), v);
            assert_ne!(v, node_vector(&s, 4));
            assert_ne!(v, node_vector(&RunSpec { seed: s.seed + 1, ..s.clone() }, 3));
            // The run id, algorithm and op do not change the inputs.
            let other = RunSpec { run: 99, algorithm: Algorithm::Ring, op: ReduceOp::Min, ..s.clone() };
            assert_eq!(v, node_vector(&other, 3));
            assert_eq!(digest(&v), digest(&node_vector(&s, 3)));
            assert_ne!(digest(&v), digest(&node_vector(&s, 4)));
        }
    }

    #[test]
    fn try_input_is_input_for_every_shape() {
        for collective in Collective::iter() {
            let s = spec(collective, Dtype::F32, ReduceOp::Sum, 64, 1);
            for node in 0..4 {
                let input = input(&s, 4, node);
                assert_eq!(input.len(), input_len(&s, 4, node), "{collective} node {node}");
                assert_eq!(try_input(&s, 4, node).expect("64 B fit"), input, "{collective} node {node}");
            }
        }
        // An input larger than the address space is refused, not attempted.
        let s = spec(Collective::Alltoall, Dtype::I64, ReduceOp::Sum, 1 << 61, 0);
        assert!(try_input(&s, 4, 0).is_err());
    }

    #[test]
    fn inputs_are_pinned() {
        // Nodes of different builds must generate the same inputs: pin a few values.
        let s = spec(Collective::Reduce, Dtype::I64, ReduceOp::Sum, 16, 0);
        let mut rng = ChaCha8Rng::seed_from_u64(0x5eed);
        rng.set_stream(2);
        let first = rng.next_u64();
        assert_eq!(node_vector(&s, 2)[..8], first.to_le_bytes());
        assert_eq!(digest(b""), 0x2d06_8005_38d3_94c2);
    }

    #[test]
    fn float_inputs_are_bounded_with_both_signs() {
        for dtype in [Dtype::F32, Dtype::F64] {
            let s = spec(Collective::Reduce, dtype, ReduceOp::Prod, 1 << 16, 0);
            let values = elements::to_f64s(dtype, &node_vector(&s, 1));
            assert!(values.iter().all(|v| (0.5..2.0).contains(&v.abs())), "{dtype}");
            let negative = values.iter().filter(|v| **v < 0.0).count();
            let n = values.len();
            assert!(negative > n * 45 / 100 && negative < n * 55 / 100, "{negative} of {n}");
            let (lo, hi) = values.iter().fold((2.0f64, 0.0f64), |(lo, hi), v| (lo.min(v.abs()), hi.max(v.abs())));
            assert!(lo < 0.51 && hi > 1.99, "{dtype}: magnitudes span [{lo}, {hi}]");
        }
    }
}
