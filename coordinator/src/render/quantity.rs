//! Quantities as people write them in titles and messages.

/// A byte count as people write it: "8 B", "1 KiB", "1.5 MiB" (no ".0").
pub fn size_text(bytes: u64) -> String {
    bytesize::ByteSize::b(bytes).display().iec().to_string().replace(".0 ", " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(size_text(8), "8 B");
        assert_eq!(size_text(65536), "64 KiB");
        assert_eq!(size_text(3 << 19), "1.5 MiB");
    }
}
