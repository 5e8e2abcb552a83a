//! `fscrypt-rs`: the command-line front end of fscrypt-rs.
//!
//! This binary only parses arguments, dispatches to one module per verb
//! under `commands/` (helpers they share are under `support/`), and maps
//! errors to exit codes. Format and crypto logic live in the library crates.

use std::process::ExitCode;

use clap::{CommandFactory, Parser, Subcommand};

mod commands;
mod support;

/// Linux fscrypt in Rust: manage kernel fscrypt, verify its ciphertext,
/// benchmark crypto providers, and mount a userspace fscrypt filesystem.
#[derive(Parser, Debug)]
#[command(name = "fscrypt-rs", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List every registered crypto implementation, its self-test result and
    /// which one is selected per algorithm.
    Providers(commands::providers::Args),
    /// Create a vault: a random master key, the root v2 policy and
    /// protectors (passphrase and/or key file) in an empty directory.
    ///
    /// The passphrase comes from --passfile or --extpass (first line), else
    /// from the terminal (asked twice) or one line of stdin. Its Argon2id
    /// cost is calibrated on this machine to take about --kdf-time seconds
    /// per unlock (default 1): medians of whole derivations, the chosen cost
    /// measured again, and refused unless it takes half to twice that; or it
    /// is exactly --argon2-memory MiB and --argon2-passes passes. Every cost
    /// is bounded (memory x passes at most 32 GiB), so no vault takes more
    /// than about a minute to unlock.
    Init(commands::init::Args),
    /// Change the passphrase of a vault's passphrase protector (the data
    /// stays as it is: only the config is rewritten).
    ///
    /// Asks for the old passphrase (or takes it from --passfile/--extpass,
    /// or unlocks with --key-file or --recovery-key instead) and checks it,
    /// then asks for the new one twice (on a terminal, without echo). When
    /// stdin is not a terminal it reads a line per passphrase it needs: the
    /// old one (unless given another way), then the new one. A wrong old
    /// secret changes nothing and exits with status 12. The new
    /// passphrase keeps the protector's name and Argon2id costs. The config
    /// is replaced atomically under a lock, so a crash leaves the old or the
    /// new passphrase working, never neither.
    Passwd(commands::passwd::Args),
    /// List, add or remove a vault's protectors: passphrases, key files,
    /// recovery keys (the data stays as it is: only the config is rewritten).
    ///
    /// A vault may have any number of protectors of each kind (up to 32 in
    /// all), each with a name. `add` and `remove` first unlock the vault
    /// with an existing protector: a passphrase by default (prompted, or
    /// the first line of stdin, --passfile FILE or --extpass CMD), or
    /// --key-file FILE, or --recovery-key. With stdin not a terminal, `add
    /// ... passphrase` reads the unlocking passphrase (unless given
    /// another way), then the new one, one line each.
    /// Removing the last protector is refused. Exit status 12: the
    /// unlocking secret is wrong (nothing changed).
    Protector(commands::protector::Args),
    /// Show a vault's format, creation time, policy, key identifier and
    /// protectors with their KDF costs (needs no key; prints no secret).
    Info(commands::info::Args),
    /// Mount a vault through FUSE (in the background unless --foreground).
    Mount(commands::mount::Args),
    /// Unmount a vault mounted with `fscrypt-rs mount`.
    Unmount(commands::unmount::Args),
    /// Check a vault's backing store (and with --repair remove what
    /// interrupted operations left behind). Exit 0 clean, 1 problems, 2
    /// could not run, 12 wrong passphrase or key file.
    Fsck(commands::fsck::Args),
    /// Show the encrypted filesystem end to end in a temporary directory.
    Demo(commands::demo::Args),
    AddKey(commands::add_key::Args),
    RemoveKey(commands::remove_key::Args),
    KeyStatus(commands::key_status::Args),
    SetPolicy(commands::set_policy::Args),
    /// Show the encryption policy of a file or directory.
    GetPolicy(commands::get_policy::Args),
    /// Print the encryption nonce of a file or directory.
    Nonce(commands::nonce::Args),
    ImportKey(commands::import_key::Args),
    GenerateKey(commands::generate_key::Args),
    PrepareKey(commands::prepare_key::Args),
    Status(commands::status::Args),
    Setup(commands::setup::Args),
    // The variants without a doc comment take their help (`about`, and
    // `long_about` with the exit statuses) from their `Args`: a doc comment
    // here would replace both with its one line.
    Encrypt(commands::encrypt::Args),
    Unlock(commands::unlock::Args),
    Lock(commands::lock::Args),
    Purge(commands::purge::Args),
    Metadata(commands::metadata::Args),
    Verify(commands::verify::Args),
    Image(commands::image::Args),
    /// En/decrypt stdin to stdout like xfstests' fscrypt-crypt-util
    /// (drop-in: same options, output and exit status).
    Crypt(commands::crypt::Args),
    /// Show which kernel Crypto API driver kernel fscrypt would get for each
    /// of its algorithms (from /proc/crypto), flagging refused offload
    /// drivers and slow generic fallbacks.
    KernelCrypto(commands::kernel_crypto::Args),
    /// Measure every fscrypt algorithm and every registered implementation
    /// of it: MB/s per data unit, ns per filename, key setup cost, heap
    /// allocations, and which implementation selection picks and why.
    Bench(commands::bench::Args),
    /// Install shell completions (bash, zsh, fish) and man pages generated
    /// from this command line.
    InstallDocs(commands::install_docs::Args),
}

/// The process's logger: env_logger (`RUST_LOG`, default `warn`), except
/// that fuser's own messages are capped at `warn` whatever `RUST_LOG` says:
/// its debug and trace lines carry the plaintext names of requests.
struct Logger(env_logger::Logger);

/// True for fuser's messages below `warn`.
fn fuser_chatter(m: &log::Metadata<'_>) -> bool {
    m.level() > log::Level::Warn && (m.target() == "fuser" || m.target().starts_with("fuser::"))
}

/// The operation of fuser's "[Not Implemented] OP(...)" warnings.
fn not_implemented(r: &log::Record<'_>) -> Option<String> {
    if !(r.target() == "fuser" || r.target().starts_with("fuser::")) {
        return None;
    }
    let text = r.args().to_string();
    let rest = text.strip_prefix("[Not Implemented] ")?;
    let op: String = rest
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect();
    Some(op)
}

impl log::Log for Logger {
    fn enabled(&self, m: &log::Metadata<'_>) -> bool {
        !fuser_chatter(m) && self.0.enabled(m)
    }
    fn log(&self, r: &log::Record<'_>) {
        if let Some(op) = not_implemented(r) {
            // fuser warns, over several lines and with the request's
            // arguments, each time it answers ENOSYS for an operation we
            // leave to the kernel (flush on every close, once per mount).
            // That is no warning: one debug line, the operation's name only.
            let args = format_args!("fuser answered ENOSYS to {op} (not implemented; normal)");
            let record = log::Record::builder()
                .args(args)
                .level(log::Level::Debug)
                .target("fscrypt_fuse::fuser")
                .build();
            if self.0.enabled(record.metadata()) {
                self.0.log(&record);
            }
            return;
        }
        if self.enabled(r.metadata()) {
            self.0.log(r);
        }
    }
    fn flush(&self) {
        self.0.flush();
    }
}

fn init_logging() {
    let logger =
        // The TPM and PKCS#11 libraries log their own errors, which the
        // seal modules turn into one line that says what to do.
        env_logger::Builder::from_env(
            env_logger::Env::default().default_filter_or("warn,tss_esapi=off,cryptoki=off"),
        )
            .format_timestamp(None)
            .build();
    log::set_max_level(logger.filter());
    let _ = log::set_boxed_logger(Box::new(Logger(logger)));
}

/// An error and its causes on one line, `outer: cause: ...`, leaving out
/// a cause whose text the line already holds (many library errors print
/// their source as part of their own message).
pub(crate) fn error_text(err: &anyhow::Error) -> String {
    let mut line = String::new();
    for cause in err.chain() {
        let text = cause.to_string();
        if line.is_empty() {
            line = text;
        } else if !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
    }
    line
}

fn main() -> ExitCode {
    support::seal::quiet_tss_logs();
    init_logging();
    if commands::mount::invoked_as_helper() {
        return commands::mount::helper_main();
    }
    let cli = Cli::parse();
    if matches!(
        cli.command,
        Command::Init(_)
            | Command::Passwd(_)
            | Command::Protector(_)
            | Command::Mount(_)
            | Command::Fsck(_)
            | Command::Demo(_)
            | Command::AddKey(_)
            | Command::ImportKey(_)
            | Command::PrepareKey(_)
            | Command::Crypt(_)
            | Command::Encrypt(_)
            | Command::Unlock(_)
            | Command::Image(_)
    ) {
        // These read a passphrase, key file or raw key: no core dumps.
        support::secret::protect_process();
    }
    let result = match cli.command {
        Command::Providers(args) => commands::providers::exec(args),
        Command::Init(args) => commands::init::exec(args),
        Command::Passwd(args) => commands::passwd::exec(args),
        Command::Protector(args) => commands::protector::exec(args),
        Command::Info(args) => commands::info::exec(args),
        Command::Mount(args) => commands::mount::exec(args),
        Command::Unmount(args) => commands::unmount::exec(args),
        Command::Fsck(args) => commands::fsck::exec(args),
        Command::Demo(args) => commands::demo::exec(args),
        Command::AddKey(args) => commands::add_key::exec(args),
        Command::RemoveKey(args) => commands::remove_key::exec(args),
        Command::KeyStatus(args) => commands::key_status::exec(args),
        Command::SetPolicy(args) => commands::set_policy::exec(args),
        Command::GetPolicy(args) => commands::get_policy::exec(args),
        Command::Nonce(args) => commands::nonce::exec(args),
        Command::ImportKey(args) => commands::import_key::exec(args),
        Command::GenerateKey(args) => commands::generate_key::exec(args),
        Command::PrepareKey(args) => commands::prepare_key::exec(args),
        Command::Status(args) => commands::status::exec(args),
        Command::Purge(args) => commands::purge::exec(args),
        Command::Setup(args) => commands::setup::exec(args),
        Command::Encrypt(args) => commands::encrypt::exec(args),
        Command::Unlock(args) => commands::unlock::exec(args),
        Command::Lock(args) => commands::lock::exec(args),
        Command::Metadata(args) => commands::metadata::exec(args),
        Command::Verify(args) => commands::verify::exec(args),
        Command::Image(args) => commands::image::exec(args),
        Command::Crypt(args) => commands::crypt::exec(args),
        Command::KernelCrypto(args) => commands::kernel_crypto::exec(args),
        Command::Bench(args) => commands::bench::exec(args),
        Command::InstallDocs(args) => commands::install_docs::exec(args, Cli::command()),
    };
    match result {
        Ok(code) => code,
        Err(err) => {
            // A closed stdout (e.g. `| head`) is not a failure.
            if let Some(io) = err.downcast_ref::<std::io::Error>()
                && io.kind() == std::io::ErrorKind::BrokenPipe
            {
                return ExitCode::SUCCESS;
            }
            eprintln!("fscrypt-rs: {}", error_text(&err));
            ExitCode::FAILURE
        }
    }
}
