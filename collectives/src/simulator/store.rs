//! The simulator's stores: [`Chunked`], a growing array in chunks that never copies more
//! than one of them, and [`Slab`], items that stay where they were put, found by a `u32`
//! index.

use super::huge_pages;

/// A growing array in chunks of about 8 MiB: the first grows as a vector does (so a small
/// simulation's array takes little), the next ones are made whole and filled as items
/// are taken. Growing never copies more than a chunk (a `Vec` that doubles holds
/// everything twice while it copies: at 2^24 nodes the events in flight alone take a
/// gigabyte), a run of items never spans two chunks, and a chunk made whole lies mostly
/// in huge pages ([`huge_pages`]: it holds three or four of them).
pub(super) struct Chunked<T> {
    chunks: Vec<Vec<T>>,
}

impl<T> Default for Chunked<T> {
    fn default() -> Self {
        Chunked { chunks: Vec::new() }
    }
}

impl<T: Default> Chunked<T> {
    /// Items of a chunk (a power of two, so that an index splits by shift and mask).
    const PER_CHUNK: usize = 1 << ((8usize << 20) / size_of::<T>()).ilog2();

    /// A run of `count` new items (defaults); the index of the first.
    pub(super) fn run(&mut self, count: usize) -> u32 {
        let full = |chunk: &Vec<T>| chunk.len() + count > Self::PER_CHUNK;
        if self.chunks.last().is_none_or(full) {
            let chunk = match self.chunks.is_empty() {
                true => Vec::new(),
                false => huge_pages::with_capacity(Self::PER_CHUNK),
            };
            self.chunks.push(chunk);
        }
        let chunk = self.chunks.len() - 1;
        let last = &mut self.chunks[chunk];
        let at = chunk * Self::PER_CHUNK + last.len();
        if last.len() + count > last.capacity() {
            // The first chunk, doubling: never past a chunk's size.
            last.reserve_exact((2 * last.capacity()).clamp(last.len() + count, Self::PER_CHUNK) - last.len());
        }
        last.extend((0..count).map(|_| T::default()));
        u32::try_from(at).expect("fewer than 4 billion items at once")
    }

    pub(super) fn at(&self, index: u32) -> &T {
        let index = index as usize;
        &self.chunks[index / Self::PER_CHUNK][index % Self::PER_CHUNK]
    }

    pub(super) fn at_mut(&mut self, index: u32) -> &mut T {
        let index = index as usize;
        &mut self.chunks[index / Self::PER_CHUNK][index % Self::PER_CHUNK]
    }
}

/// Items that stay where they were put, found by a `u32` index; freed places are reused.
pub(super) struct Slab<T> {
    items: Chunked<Option<T>>,
    free: Vec<u32>,
}

impl<T> Default for Slab<T> {
    fn default() -> Self {
        Slab { items: Chunked::default(), free: Vec::new() }
    }
}

impl<T> Slab<T> {
    pub(super) fn insert(&mut self, item: T) -> u32 {
        let index = self.free.pop().unwrap_or_else(|| self.items.run(1));
        *self.items.at_mut(index) = Some(item);
        index
    }

    pub(super) fn remove(&mut self, index: u32) -> T {
        let item = self.items.at_mut(index).take().expect("an item is in its place");
        self.free.push(index);
        item
    }

    pub(super) fn get(&self, index: u32) -> &T {
        self.items.at(index).as_ref().expect("an item is in its place")
    }

    pub(super) fn get_mut(&mut self, index: u32) -> &mut T {
        self.items.at_mut(index).as_mut().expect("an item is in its place")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every item of a chunked array is found where it was put, across chunks that double
    /// and chunks past them, and runs never span two chunks.
    #[test]
    fn a_chunked_array_finds_every_item_where_it_was_put() {
        let mut array = Chunked::<u64>::default();
        let per_chunk = Chunked::<u64>::PER_CHUNK;
        let mut runs = Vec::new();
        for (n, count) in (0..).zip([1, 3, 4096, 7, 4095, 2].into_iter().cycle()).take(2500) {
            let at = array.run(count);
            for offset in 0..count {
                *array.at_mut(at + offset as u32) = n;
            }
            let (first, last) = (at as usize / per_chunk, (at as usize + count - 1) / per_chunk);
            assert_eq!(first, last, "run {n} of {count} at {at} spans two chunks");
            runs.push((at, count, n));
        }
        assert!(array.chunks.len() > 2, "only {} chunks", array.chunks.len());
        assert!(array.chunks.iter().all(|chunk| chunk.capacity() <= per_chunk), "a chunk grew past its size");
        for (at, count, n) in runs {
            for offset in 0..count {
                assert_eq!(*array.at(at + offset as u32), n, "item {offset} of run {n} at {at}");
            }
        }
    }

    /// A slab gives back what was put at an index, and reuses a freed index before it
    /// grows.
    #[test]
    fn a_slab_gives_back_what_was_put_and_reuses_freed_places() {
        let mut slab = Slab::<String>::default();
        let indices: Vec<u32> = (0..100).map(|n| slab.insert(format!("item {n}"))).collect();
        assert_eq!(indices, (0..100).collect::<Vec<u32>>(), "a new slab fills its places in order");
        for n in [3, 50, 99] {
            assert_eq!(slab.remove(n), format!("item {n}"));
        }
        // The places freed last are taken first, and no new place is made while one is free.
        assert_eq!([slab.insert("a".into()), slab.insert("b".into()), slab.insert("c".into())], [99, 50, 3]);
        assert_eq!(slab.insert("d".into()), 100);
        slab.get_mut(7).push_str(" changed");
        for (index, expected) in [(7, "item 7 changed"), (8, "item 8"), (99, "a"), (50, "b"), (3, "c"), (100, "d")] {
            assert_eq!(slab.get(index), expected, "at {index}");
        }
    }
}
