//! Numbers as people read them: `48,000`, not `48000` or `48000.0`.

/// `48,000` for 48000: digits grouped by threes with commas (the demo's pages and the rehearsal's report, which are
/// in English).
pub fn grouped(n: u64) -> String {
    waitroom_layer::grouped_digits(n, ",")
}

#[cfg(test)]
mod tests {
    use super::grouped;

    #[test]
    fn numbers_are_grouped_by_threes_from_the_right() {
        let cases = [
            (0, "0"),
            (7, "7"),
            (999, "999"),
            (1_000, "1,000"),
            (48_000, "48,000"),
            (600_000, "600,000"),
            (1_234_567, "1,234,567"),
            (u64::MAX, "18,446,744,073,709,551,615"),
        ];
        for (n, want) in cases {
            assert_eq!(grouped(n), want);
        }
    }
}
