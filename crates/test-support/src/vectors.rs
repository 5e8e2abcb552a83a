//! The shared test vectors (`testdata/vectors/*.json`, spec §13).

use std::path::PathBuf;

/// `$FSCRYPT_VECTORS_DIR`, or the repository's own `testdata/vectors`.
pub fn vectors_dir() -> PathBuf {
    match std::env::var_os("FSCRYPT_VECTORS_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../testdata/vectors"
        )),
    }
}

/// The vector file `file` (for example `fscrypt_format_vectors.json`),
/// parsed.
///
/// # Panics
/// If it cannot be read (naming the path and `FSCRYPT_VECTORS_DIR`) or is
/// not JSON.
pub fn load(file: &str) -> serde_json::Value {
    let path = vectors_dir().join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} (set FSCRYPT_VECTORS_DIR): {e}",
            path.display()
        )
    });
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file} is not valid JSON: {e}"))
}
