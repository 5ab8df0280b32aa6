//! Models and tools on top of the control plane: the cost model and `explain`, link
//! calibration, the choice of time dilation, the model benchmark, size sweeps and the
//! simulator's command. Uses `control` to run and `render` to present; neither of those
//! uses this layer.

pub mod bench_model;
pub mod calibrate;
pub mod closed_form;
pub mod dilation;
pub mod execute;
pub mod explain;
pub mod goal_out;
pub mod memory;
pub mod model;
pub mod simulate;
pub mod sweep;
pub mod tune;
