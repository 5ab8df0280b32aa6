//! Time dilation of an emulated run: the factor, how people write it, and the conversions
//! between emulated and wall time.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Time dilation of an emulated run, after time-warped network emulation ([Gupta 2006],
/// [DieCast 2008]): the emulated world runs `K` times slower than the wall clock. Every
/// emulated t_s, t_h, t_w and due time lasts K times longer on the wall clock, so the
/// software's own costs (waking up, reading, writing, combining) shrink by K against
/// the emulated times; every time a run reports is emulated time (wall time / K).
/// K is held in thousandths: 1 to 1000, to three decimals.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Dilation {
    pub(super) milli: u32,
}

/// Why a dilation factor cannot be.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DilationError {
    #[error("a dilation of {text} is not a number (give a factor from 1 to 1000, e.g. 4 or 2.5, or `auto`)")]
    NotANumber { text: String },
    #[error(
        "a dilation of {factor} is out of range: the emulated world runs 1 to 1000 times slower than the wall clock"
    )]
    OutOfRange { factor: String },
}

impl Dilation {
    /// No dilation: emulated time is wall time.
    pub const NONE: Dilation = Dilation { milli: 1000 };
    /// The largest factor, ×1000: a 1 ms emulated run then takes a second.
    pub const MAX: Dilation = Dilation { milli: 1_000_000 };

    /// K = `milli` / 1000, if it lies in 1..=1000.
    pub fn from_milli(milli: u32) -> Result<Self, DilationError> {
        let dilation = Dilation { milli };
        dilation.check()?;
        Ok(dilation)
    }

    /// The smallest dilation of at least `factor`, to three decimals, if it lies in
    /// 1..=1000.
    pub fn at_least(factor: f64) -> Result<Self, DilationError> {
        let out = || DilationError::OutOfRange { factor: format!("{factor}") };
        if !factor.is_finite() || factor > 1000.0 {
            return Err(out());
        }
        // Rounded up, less a hair of floating-point noise (2.5 must stay 2500).
        let milli = (factor * 1000.0 - 1e-6).ceil();
        if milli < 1000.0 {
            return Err(out());
        }
        Self::from_milli(milli as u32)
    }

    /// Refuses a factor outside 1..=1000 (one that came over the wire, say).
    pub fn check(self) -> Result<(), DilationError> {
        if (Self::NONE.milli..=Self::MAX.milli).contains(&self.milli) {
            Ok(())
        } else {
            Err(DilationError::OutOfRange { factor: format!("{}", f64::from(self.milli) / 1000.0) })
        }
    }

    /// K in thousandths.
    pub fn milli(self) -> u32 {
        self.milli
    }

    /// K.
    pub fn factor(self) -> f64 {
        f64::from(self.milli) / 1000.0
    }

    /// Whether the emulated world runs slower than the wall clock (K > 1).
    pub fn dilates(self) -> bool {
        self.milli > Self::NONE.milli
    }

    /// How many wall nanoseconds `emulated_ns` last (saturating).
    pub fn wall_ns(self, emulated_ns: u64) -> u64 {
        u64::try_from(u128::from(emulated_ns) * u128::from(self.milli) / 1000).unwrap_or(u64::MAX)
    }

    /// How many emulated nanoseconds `wall_ns` are (rounded down).
    pub fn emulated_ns(self, wall_ns: u64) -> u64 {
        (u128::from(wall_ns) * 1000 / u128::from(self.milli.max(1))) as u64
    }

    /// `wall` in emulated time.
    pub fn emulated(self, wall: Duration) -> Duration {
        wall.mul_f64(1000.0 / f64::from(self.milli.max(1)))
    }

    /// How long `emulated` lasts on the wall clock (saturating).
    pub fn wall(self, emulated: Duration) -> Duration {
        Duration::try_from_secs_f64(emulated.as_secs_f64() * self.factor()).unwrap_or(Duration::MAX)
    }
}

impl Default for Dilation {
    fn default() -> Self {
        Self::NONE
    }
}

/// `4`, `2.5`, `12.125`: K with no trailing zeros.
impl std::fmt::Display for Dilation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, thousandths) = (self.milli / 1000, self.milli % 1000);
        if thousandths == 0 {
            return write!(f, "{whole}");
        }
        let decimals = format!("{thousandths:03}");
        write!(f, "{whole}.{}", decimals.trim_end_matches('0'))
    }
}

/// A factor as people write it: `4`, `2.5`, `x4` or `×4`.
impl std::str::FromStr for Dilation {
    type Err = DilationError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let trimmed = text.trim();
        let number = trimmed.strip_prefix(['x', 'X', '×']).unwrap_or(trimmed);
        let plain = !number.is_empty() && number.chars().all(|c| c.is_ascii_digit() || c == '.');
        let factor: f64 = match number.parse() {
            Ok(factor) if plain => factor,
            _ => return Err(DilationError::NotANumber { text: text.to_owned() }),
        };
        if number.split_once('.').is_some_and(|(_, decimals)| decimals.len() > 3) {
            return Err(DilationError::NotANumber { text: text.to_owned() });
        }
        Self::at_least(factor).map_err(|_| DilationError::OutOfRange { factor: number.to_owned() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dilations_read_and_print_as_people_write_them() {
        for (text, milli, shown) in [
            ("4", 4000, "4"),
            ("2.5", 2500, "2.5"),
            ("x12.125", 12125, "12.125"),
            ("×1", 1000, "1"),
            ("1000", 1_000_000, "1000"),
        ] {
            let dilation: Dilation = text.parse().unwrap_or_else(|e| panic!("{text}: {e}"));
            assert_eq!(dilation.milli(), milli, "{text}");
            assert_eq!(dilation.to_string(), shown, "{text}");
        }
        for bad in ["", "auto", "-2", "0.5", "1001", "2.0001", "1e3", "nan", "inf", " x "] {
            assert!(bad.parse::<Dilation>().is_err(), "{bad:?} was taken");
        }
        let error = "0.5".parse::<Dilation>().unwrap_err().to_string();
        assert!(error.contains("1 to 1000"), "{error}");
    }

    #[test]
    fn dilation_converts_both_ways() {
        let k = Dilation::from_milli(3000).unwrap();
        assert_eq!(k.wall_ns(1_000), 3_000);
        assert_eq!(k.emulated_ns(3_000), 1_000);
        assert_eq!(k.emulated_ns(k.wall_ns(123_456_789)), 123_456_789);
        assert_eq!(k.emulated(Duration::from_millis(3)), Duration::from_millis(1));
        assert_eq!(k.wall(Duration::from_millis(2)), Duration::from_millis(6));
        // Absolute readings of the wall clock (ns since 1970) stay exact, far from u64's end.
        let now_ns = 1_800_000_000_000_000_000u64;
        assert_eq!(Dilation::MAX.emulated_ns(Dilation::MAX.wall_ns(now_ns / 1000)), now_ns / 1000);
        assert_eq!(Dilation::MAX.wall_ns(u64::MAX), u64::MAX, "saturates");
        assert_eq!(Dilation::at_least(2.5).unwrap().milli(), 2500);
        assert_eq!(Dilation::at_least(2.5001).unwrap().milli(), 2501);
        assert!(Dilation::at_least(0.99).is_err() && Dilation::at_least(f64::NAN).is_err());
        assert!(!Dilation::NONE.dilates() && k.dilates());
    }
}
