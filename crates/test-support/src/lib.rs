//! Dev-only scaffolding shared by the workspace's tests (never a normal
//! dependency, never published). Each piece exists once here instead of a
//! copy per test file.
//!
//! | module | what |
//! | --- | --- |
//! | [`tempdir`] | [`TempDir`]: a unique directory below the temp dir, removed on drop |
//! | [`skip`] | loud skip checks (root, /dev/fuse, fusermount3, setpriv, tools) and [`need_fuse!`] |
//! | [`mount`] | mountinfo checks, waits, [`MountGuard`] for the real binary, [`BindGuard`], [`clear_mount`] |
//! | [`cli`] | driving the real `fscrypt-rs` binary (init with a key file) |
//! | [`run`] | running a command with stdin bytes and a timeout, [`os_args!`], `text` |
//! | [`procs`] | finding a process by its argv (the mount daemon), its uid, [`procs::wait_for`], [`procs::ChildGuard`] |
//! | [`users`] | `setpriv` wrappers that run a command as another user (uid 65534) |
//! | [`bytes`] | hex, substring search, a deterministic xorshift generator |
//! | [`alloc`] | the counting global allocator of the zero-allocation tests |
//! | [`fixture`] | the frozen `tests/fixtures` vault: copy, manifest, [`fixture::Tree`] walk |
//! | [`vectors`] | the shared vectors directory (`$FSCRYPT_VECTORS_DIR` or `testdata/vectors`) |
//! | [`tree`] | recursive walks of a directory: paths, bytes, grep |
//! | [`logs`] | capturing this process's `log` records |
//! | [`env`] | `FSCRYPT_RS_LONG_TESTS` and durations that depend on it |
//! | `fuse` (feature `fuse`) | the in-process mount harness: a vault mounted by `BackgroundMount`, unmounted on drop |
//! | `loopfs` (feature `loopdev`) | `LoopExt4`: a scratch ext4 on a loop device (mkfs, losetup, mount; all undone on drop) |
//! | `loopdev` (feature `loopdev`) | scratch loop-device ext4 with loud skips (over `loopfs`), raw block edits |

pub mod alloc;
pub mod bytes;
pub mod cli;
pub mod env;
pub mod fixture;
#[cfg(feature = "fuse")]
pub mod fuse;
pub mod logs;
#[cfg(feature = "loopdev")]
pub mod loopdev;
#[cfg(feature = "loopdev")]
pub mod loopfs;
pub mod mount;
pub mod procs;
pub mod run;
pub mod skip;
pub mod swtpm;
pub mod tempdir;
pub mod tree;
pub mod users;
pub mod vectors;

pub use bytes::{contains, hex};
pub use mount::{BindGuard, MountGuard, clear_mount, is_mounted};
pub use run::text;
pub use skip::{fuse_available, is_root};
pub use tempdir::TempDir;
