//! The simulator's queue of timed events: a radix heap over virtual instants, which keeps
//! the events of one instant in the order they were scheduled.

/// The pending events in time order, those due at the same instant in the order they
/// were scheduled: a radix heap (Ahuja, Mehlhorn, Orlin and Tarjan, "Faster algorithms
/// for the shortest path problem", J. ACM 37(2), 1990), which fits a simulation's clock:
/// no event is ever due before the last one taken. Bucket b holds the events whose
/// instant first differs from that last one in bit b - 1; the events due at the last
/// instant itself wait in `due_now`. Scheduling is a push onto one bucket; when `due_now`
/// runs out, the lowest bucket that holds events is emptied into lower ones (its earliest
/// instant becoming the last), so an event moves down at most 64 times and a schedule
/// whose instants hold many events (a hypercube's) or one each (a ring's, whose nodes
/// drift apart by the bytes of their pieces) costs a few instructions an event either
/// way. Events due at the same instant always share a bucket and keep their order.
pub(super) struct EventQueue {
    /// The instant of the events in `due_now` (no pending event is due before it).
    last_ns: u64,
    /// The events due at `last_ns`, in order; those before `taken` are done.
    due_now: Vec<u32>,
    taken: usize,
    /// (instant, event) by the highest bit in which the instant differs from `last_ns`
    /// (bucket 0 unused: those are `due_now`).
    buckets: [Vec<(u64, u32)>; 65],
    /// Bit b - 1 set: bucket b holds events (the lowest found in one instruction).
    occupied: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        EventQueue {
            last_ns: 0,
            due_now: Vec::new(),
            taken: 0,
            buckets: std::array::from_fn(|_| Vec::new()),
            occupied: 0,
        }
    }
}

impl EventQueue {
    pub(super) fn push(&mut self, at_ns: u64, slot: u32) {
        debug_assert!(at_ns >= self.last_ns, "an event in the past: {at_ns} < {}", self.last_ns);
        match Self::bucket(at_ns, self.last_ns) {
            0 => self.due_now.push(slot),
            bucket => {
                self.buckets[bucket].push((at_ns, slot));
                self.occupied |= 1 << (bucket - 1);
            }
        }
    }

    fn bucket(at_ns: u64, last_ns: u64) -> usize {
        (u64::BITS - (at_ns ^ last_ns).leading_zeros()) as usize
    }

    /// The instant of the earliest pending event, if any (the events due then are
    /// gathered in `due_now`).
    pub(super) fn next_ns(&mut self) -> Option<u64> {
        if self.taken < self.due_now.len() {
            return Some(self.last_ns);
        }
        self.due_now.clear();
        self.taken = 0;
        if self.occupied == 0 {
            return None;
        }
        let lowest = self.occupied.trailing_zeros() as usize + 1;
        self.occupied &= !(1 << (lowest - 1));
        let mut moving = std::mem::take(&mut self.buckets[lowest]);
        self.last_ns = moving.iter().map(|&(at_ns, _)| at_ns).min().expect("a bucket that holds events");
        for (at_ns, slot) in moving.drain(..) {
            self.push(at_ns, slot);
        }
        // Its storage back, for the next events that land in it.
        self.buckets[lowest] = moving;
        Some(self.last_ns)
    }

    /// The next event due at `at_ns`, if any (after [`EventQueue::next_ns`] gave `at_ns`).
    pub(super) fn pop_at(&mut self, at_ns: u64) -> Option<u32> {
        let slot = *self.due_now.get(self.taken).filter(|_| at_ns == self.last_ns)?;
        self.taken += 1;
        Some(slot)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        /// Events come out in time order, those of one instant in the order they were
        /// scheduled, whatever mix of instants (some far apart, some equal, some now)
        /// and takes the clock sees: against a list searched for its earliest.
        #[test]
        fn the_event_queue_gives_events_in_time_order_and_an_instants_in_the_order_scheduled(
            steps in proptest::collection::vec((0u8..3, 0u64..5, 0u32..40), 1..600)
        ) {
            let (mut queue, mut pending, mut now_ns) = (EventQueue::default(), Vec::<(u64, u32)>::new(), 0u64);
            let take = |queue: &mut EventQueue, pending: &mut Vec<(u64, u32)>, now_ns: &mut u64| {
                let earliest = pending.iter().enumerate().min_by_key(|(_, event)| **event).map(|(at, _)| at);
                match earliest {
                    None => proptest::prop_assert_eq!(queue.next_ns(), None),
                    Some(at) => {
                        let (at_ns, slot) = pending.remove(at);
                        proptest::prop_assert_eq!(queue.next_ns(), Some(at_ns));
                        proptest::prop_assert_eq!(queue.pop_at(at_ns), Some(slot));
                        *now_ns = at_ns;
                    }
                }
                Ok(())
            };
            for (slot, (action, scale, offset)) in (0u32..).zip(steps) {
                if action == 0 {
                    take(&mut queue, &mut pending, &mut now_ns)?;
                } else {
                    let at_ns = now_ns + u64::from(offset) * 10u64.pow(scale as u32 * 3);
                    queue.push(at_ns, slot);
                    pending.push((at_ns, slot));
                }
            }
            while !pending.is_empty() {
                take(&mut queue, &mut pending, &mut now_ns)?;
            }
            proptest::prop_assert_eq!(queue.next_ns(), None);
        }
    }
}
