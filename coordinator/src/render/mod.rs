//! Rendering: run reports and the house table, how runs were dilated, the message flow
//! (`messages`: events joined into messages; `trace`: the Chrome trace; `flow`: what
//! `--trace` and `--diagram` write; `links`: the link physics in words), topology
//! text, where output goes (standard output, files checked before a run), the sweep's
//! progress bar and, with the `pictures` feature, the pictures
//! (space-time diagrams, topology drawings and sweep plots, as SVG or PNG). Uses
//! `control`'s types only, never `tools`.

use std::path::Path;

pub mod bench_model;
pub mod bus_factor;
#[cfg(feature = "pictures")]
pub mod diagram;
pub mod dilation;
pub mod flow;
pub mod links;
pub mod messages;
pub mod output;
pub mod page;
#[cfg(feature = "pictures")]
pub mod picture;
#[cfg(feature = "pictures")]
pub mod plot;
pub mod progress;
pub mod quantity;
pub mod report;
pub mod schema;
pub mod simulation;
pub mod sweep_outputs;
pub mod sweep_table;
pub mod table;
#[cfg(feature = "pictures")]
pub mod topology_svg;
pub mod topology_view;
pub mod trace;

/// A picture was asked of a binary built without the `pictures` feature.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{option} draws a picture, but this topocomm was built without pictures (cargo feature `pictures`)")]
pub struct PicturesLeftOut {
    /// The option that asked, e.g. `--plot`.
    pub option: &'static str,
}

/// Refuses `option` (`--diagram`, `--svg`, `--plot`) when it names a file and this
/// binary was built without pictures; does nothing in a binary with them.
pub fn check_pictures_built(option: &'static str, path: Option<&Path>) -> Result<(), PicturesLeftOut> {
    if cfg!(feature = "pictures") || path.is_none() { Ok(()) } else { Err(PicturesLeftOut { option }) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_picture_option_is_refused_only_without_pictures() {
        assert_eq!(check_pictures_built("--plot", None), Ok(()));
        let asked = check_pictures_built("--plot", Some(Path::new("sweep.svg")));
        if cfg!(feature = "pictures") {
            assert_eq!(asked, Ok(()));
        } else {
            let error = asked.unwrap_err().to_string();
            assert!(error.starts_with("--plot draws a picture") && error.contains("built without pictures"), "{error}");
        }
    }
}
