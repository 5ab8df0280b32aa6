//! Rendering: run reports and tables, Chrome traces, topology text, and the pictures
//! (space-time diagrams, topology drawings, sweep plots, SVG and PNG). Uses `control`'s
//! types only; never `tools`.

pub mod diagram;
pub mod picture;
pub mod plot;
pub mod report;
pub mod topology_svg;
pub mod topology_view;
pub mod trace;
