//! What a run's nodes run over `Comm` besides their collective: the common start of
//! every iteration ([`start`]) and the dilation probe's steps ([`probe`]). The driver
//! runs them (`daemon::driver`) and the allowances count them (`allowance`), so they sit
//! beneath both.

pub mod probe;
pub mod start;
