//! Block layouts: how a buffer splits into p blocks — equal blocks of `--size` bytes
//! for the personalized and all-to-all collectives, or near-equal element-aligned pieces
//! when a large-message algorithm cuts one vector into p parts — and the zero-copy
//! slicing and the concatenation of block ranges that every block algorithm needs.

use std::ops::Range;

use bytes::{Bytes, BytesMut};

/// Joining parts into one buffer is what a message's payload does (`comm::payload`); the
/// algorithms reach it here, with their other building blocks.
pub use crate::comm::payload::concat;

/// Where each of p blocks lies in a buffer: block i holds `base + 1` units if
/// `i < extra`, else `base` units, of `unit` bytes each, one after another. Computed, not
/// stored: a layout of a million blocks takes no more memory than one of two.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    p: usize,
    unit: usize,
    base: usize,
    extra: usize,
}

impl BlockLayout {
    /// p blocks of `block` bytes each.
    pub fn uniform(p: usize, block: usize) -> Self {
        BlockLayout { p, unit: block, base: 1, extra: 0 }
    }

    /// `total` bytes of `elem`-byte elements cut into p element-aligned pieces whose
    /// element counts differ by at most one (the first `n mod p` pieces get the extra).
    pub fn split(total: usize, p: usize, elem: usize) -> Self {
        let elements = total / elem;
        BlockLayout { p, unit: elem, base: elements / p, extra: elements % p }
    }

    /// Where block `i` starts (`i = p`: the end of the last).
    fn offset(&self, i: usize) -> usize {
        (i * self.base + i.min(self.extra)) * self.unit
    }

    /// The number of blocks.
    pub fn p(&self) -> usize {
        self.p
    }

    /// Bytes of block `i`.
    pub fn len(&self, i: usize) -> usize {
        self.offset(i + 1) - self.offset(i)
    }

    /// Bytes of all blocks.
    pub fn total(&self) -> usize {
        self.offset(self.p)
    }

    /// The byte range of block `i`.
    pub fn range(&self, i: usize) -> Range<usize> {
        self.offset(i)..self.offset(i + 1)
    }

    /// The byte range of the contiguous blocks `blocks`.
    pub fn span(&self, blocks: Range<usize>) -> Range<usize> {
        self.offset(blocks.start)..self.offset(blocks.end)
    }

    /// Blocks `blocks` of `buffer`, without copying.
    pub fn slice(&self, buffer: &Bytes, blocks: Range<usize>) -> Bytes {
        buffer.slice(self.span(blocks))
    }

    /// Cuts a buffer holding the contiguous `blocks` into one `Bytes` per block, without copying.
    pub fn cut(&self, buffer: &Bytes, blocks: Range<usize>) -> Vec<Bytes> {
        let base = self.offset(blocks.start);
        blocks.map(|i| buffer.slice(self.offset(i) - base..self.offset(i + 1) - base)).collect()
    }
}

/// The part `range` of `message`, to be kept while the rest of the message is passed
/// on: in an allocation of its own unless it is the whole message, because a slice
/// would hold the whole message's buffer for as long as the part is kept (a ring
/// all-to-all would then hold every message it received, 28 parcels instead of 7 on a
/// row of 8). Known zeros stay a free slice.
pub fn kept_part(message: &Bytes, range: Range<usize>) -> Bytes {
    let part = message.slice(range);
    match part.len() == message.len() || crate::zeros::is_zeros(&part) {
        true => part,
        false => Bytes::copy_from_slice(&part),
    }
}

/// A result put together from the blocks of a [`BlockLayout`] as they come, in any
/// order, each copied to its place in one buffer: a node gathering n blocks holds the
/// result's bytes, not n handles to n messages (at n = 4,096, 128 KiB a node before the
/// first byte). While every block is known zeros (lengths only) there is no buffer at
/// all, and the result is known zeros too.
pub struct PlacedBlocks {
    layout: BlockLayout,
    buffer: Option<BytesMut>,
}

impl PlacedBlocks {
    pub fn new(layout: BlockLayout) -> Self {
        PlacedBlocks { layout, buffer: None }
    }

    /// Puts `block` in the place of block `at`; a block of another length is refused
    /// (with that length).
    pub fn put(&mut self, at: usize, block: &[u8]) -> Result<(), usize> {
        let place = self.layout.span(at..at + 1);
        if block.len() != place.len() {
            return Err(block.len());
        }
        if self.buffer.is_none() && crate::zeros::is_zeros(block) {
            return Ok(());
        }
        let total = self.layout.total();
        self.buffer.get_or_insert_with(|| BytesMut::zeroed(total))[place].copy_from_slice(block);
        Ok(())
    }

    /// The whole result (a block never put reads as zeros).
    pub fn finish(self) -> Bytes {
        match self.buffer {
            Some(buffer) => buffer.freeze(),
            None => {
                crate::zeros::zeros(self.layout.total()).unwrap_or_else(|| Bytes::from(vec![0; self.layout.total()]))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_is_element_aligned_and_near_equal() {
        let layout = BlockLayout::split(10 * 8, 4, 8);
        let lens: Vec<usize> = (0..4).map(|i| layout.len(i)).collect();
        assert_eq!(lens, vec![24, 24, 16, 16]);
        assert_eq!(layout.total(), 80);
        let tiny = BlockLayout::split(2 * 4, 5, 4);
        assert_eq!((0..5).map(|i| tiny.len(i)).collect::<Vec<_>>(), vec![4, 4, 0, 0, 0]);
    }

    #[test]
    fn slice_cut_and_concat_agree() {
        let layout = BlockLayout::uniform(4, 3);
        let buffer = Bytes::from((0u8..12).collect::<Vec<_>>());
        let middle = layout.slice(&buffer, 1..3);
        assert_eq!(&middle[..], &[3, 4, 5, 6, 7, 8]);
        let parts = layout.cut(&middle, 1..3);
        assert_eq!(&parts[1][..], &[6, 7, 8]);
        assert_eq!(concat(&parts), middle);
        assert_eq!(concat(&[]), Bytes::new());
    }

    #[test]
    fn placed_blocks_in_any_order_make_the_concatenation() {
        let layout = BlockLayout::split(10 * 4, 4, 4);
        let vector: Bytes = (0..40u8).collect::<Vec<u8>>().into();
        let blocks: Vec<Bytes> = (0..4).map(|i| vector.slice(layout.span(i..i + 1))).collect();
        let mut placed = PlacedBlocks::new(layout);
        for at in [2, 0, 3, 1] {
            placed.put(at, &blocks[at]).expect("the block's length");
        }
        assert_eq!(placed.finish(), vector);
        let mut short = PlacedBlocks::new(layout);
        assert_eq!(short.put(1, &blocks[1][1..]), Err(blocks[1].len() - 1), "a block of another length is refused");
    }

    #[test]
    fn placed_blocks_of_known_zeros_hold_no_buffer() {
        let layout = BlockLayout::split(1 << 20, 8, 8);
        let mut placed = PlacedBlocks::new(layout);
        for at in 0..8 {
            let zeros = crate::zeros::zeros(layout.len(at)).expect("a region of known zeros");
            placed.put(at, &zeros).expect("the block's length");
        }
        assert!(placed.buffer.is_none());
        let result = placed.finish();
        assert_eq!(result.len(), 1 << 20);
        assert!(crate::zeros::is_zeros(&result), "known zeros, not a copy");
    }
}
