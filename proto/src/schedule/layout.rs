//! How an MSCCL-IR program's chunks fall on a node's buffers at a given size.

use super::ScheduleError;
use super::msccl::{Buffer, KNOWN_COLLECTIVES, Program};
use crate::names::{Collective, Dtype};

/// How a collective lays out a node's buffers, in multiples of `--size` (bytes per node).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// Bytes of one chunk.
    pub chunk_bytes: usize,
    /// Bytes of the input buffer and of the output buffer.
    pub input_bytes: usize,
    pub output_bytes: usize,
}

/// The collectives a program may name, with the multiples of `--size` their input and
/// output buffers hold on p nodes (topocomm's data layouts: the reference's).
fn buffer_multiples(collective: Collective, p: usize) -> Option<(usize, usize)> {
    match collective {
        Collective::Allreduce | Collective::Broadcast | Collective::Reduce => Some((1, 1)),
        Collective::Allgather => Some((1, p)),
        Collective::ReduceScatter => Some((p, 1)),
        Collective::Alltoall => Some((p, p)),
        _ => None,
    }
}

impl Program {
    /// How the program's chunks fall on `p` nodes of `size_bytes` each (`--size`, with
    /// the collective's layout) of `dtype`: the larger buffer is cut into
    /// `nchunksperloop` chunks, each a whole number of elements; every rank's input and
    /// output chunks must make exactly the collective's buffers (in place, a buffer may
    /// declare none: it is the other's). A size that does not
    /// divide is refused naming the nearest sizes that do.
    pub fn layout(&self, p: usize, size_bytes: u64, dtype: Dtype) -> Result<Layout, ScheduleError> {
        let Some((in_mult, out_mult)) = buffer_multiples(self.collective, p) else {
            return Err(ScheduleError::Layout(format!(
                "MSCCL-IR programs for {} are not supported (supported: {KNOWN_COLLECTIVES})",
                self.collective
            )));
        };
        let whole_mult = in_mult.max(out_mult);
        // Every buffer must be addressable: p × --size within usize.
        let Some(size) = usize::try_from(size_bytes).ok().filter(|size| size.checked_mul(whole_mult).is_some()) else {
            return Err(ScheduleError::Layout(format!(
                "--size {size_bytes} B on {p} nodes makes buffers of {} × {size_bytes} B, more than a node can address",
                whole_mult
            )));
        };
        let chunks = self.chunks_per_loop as usize;
        // `check` refuses it too; a program laid out unchecked must not divide by zero.
        if chunks == 0 {
            return Err(ScheduleError::Layout("the program cuts its buffers into 0 chunks".into()));
        }
        // --size must make whole_mult × size a multiple of chunks × element size.
        let unit_whole = chunks * dtype.size();
        let unit = unit_whole / gcd(whole_mult, unit_whole);
        if size == 0 || !size.is_multiple_of(unit) {
            let below = size / unit * unit;
            // The size above may not fit in usize (a --size near 2^64 B, found by fuzzing).
            let nearest = match (below, below.checked_add(unit)) {
                (0, _) => format!("{unit}"),
                (_, Some(above)) => format!("{below} or {above}"),
                (_, None) => format!("{below}"),
            };
            return Err(ScheduleError::Layout(format!(
                "--size {size} B does not cut into the program's {chunks} chunks of whole {dtype} elements \
                 ({whole_mult} × {size} B = {} B over {chunks} chunks); sizes that do are multiples of {unit} B: try {nearest}",
                whole_mult * size
            )));
        }
        let chunk_bytes = whole_mult * size / chunks;
        let layout = Layout { chunk_bytes, input_bytes: in_mult * size, output_bytes: out_mult * size };
        for (g, gpu) in self.gpus.iter().enumerate() {
            for (buffer, declared, needed) in [
                (Buffer::Input, gpu.input_chunks, layout.input_bytes),
                (Buffer::Output, gpu.output_chunks, layout.output_bytes),
            ] {
                // In place, MSCCL's tools declare no chunks for the buffer that aliases the other.
                let aliased = self.inplace && declared == 0;
                if !aliased && (declared as usize).checked_mul(chunk_bytes) != Some(needed) {
                    return Err(ScheduleError::Layout(format!(
                        "gpu {g} declares {declared} {} chunks of {chunk_bytes} B, but {}'s {} buffer holds {needed} B at --size {size} B on {p} nodes ({} chunks)",
                        buffer.name(),
                        self.collective,
                        buffer.name(),
                        needed / chunk_bytes
                    )));
                }
            }
        }
        Ok(layout)
    }
}

fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

#[cfg(test)]
mod tests {
    use super::super::msccl::fixtures::program;
    use super::*;

    #[test]
    fn sizes_that_do_not_divide_name_the_nearest_that_do() {
        let p = program(vec![vec![], vec![]]);
        let error = p.layout(2, 20, Dtype::F64).unwrap_err().to_string();
        assert!(error.contains("multiples of 16 B: try 16 or 32"), "{error}");
        assert_eq!(p.layout(2, 32, Dtype::F64).unwrap().chunk_bytes, 16);
    }

    /// Found by fuzzing (`fuzz/fuzz_targets/schedule_check.rs`): a size just under 2^64 B
    /// that does not divide overflowed naming the size above it (a panic in a debug build).
    #[test]
    fn a_size_near_the_top_of_usize_is_refused_without_overflowing() {
        let p = program(vec![vec![], vec![]]);
        let error = p.layout(2, u64::MAX - 7, Dtype::F64).unwrap_err().to_string();
        assert!(error.ends_with(&format!("try {}", u64::MAX - 15)), "{error}");
        let none = Program { chunks_per_loop: 0, ..p };
        assert!(none.layout(2, 32, Dtype::F64).is_err());
    }
}
