//! Quantities as people write them in titles and messages.

/// A byte count as people write it: "8 B", "1 KiB", "1.5 MiB" (no ".0").
pub fn size_text(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).display().iec().to_string().replace(".0 ", " ")
}

/// A count and its noun, singular for one: "1 step", "3 steps" (the noun's plural is
/// its singular and an "s").
pub fn count(n: impl Into<u64>, noun: &str) -> String {
    let n = n.into();
    if n == 1 { format!("1 {noun}") } else { format!("{n} {noun}s") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_is_singular_and_every_other_count_plural() {
        assert_eq!(count(1u64, "step"), "1 step");
        assert_eq!(count(0u64, "step"), "0 steps");
        assert_eq!(count(7u32, "iteration"), "7 iterations");
    }

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(8), "8 B");
        assert_eq!(size_text(65536), "64 KiB");
        assert_eq!(size_text(3 << 19), "1.5 MiB");
    }
}
