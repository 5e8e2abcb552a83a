//! Helpers shared by several subcommands; none of these is a subcommand
//! itself (those live under `commands/`), one module per concern.

pub mod gfs;
pub mod heap;
pub mod kernel;
pub mod mounts;
pub mod progress;
pub mod seal;
pub mod secret;
pub mod unlock;
