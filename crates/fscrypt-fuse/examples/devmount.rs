//! DEV ONLY (not committed): mount BACKING at MNT with a fixed test key.
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let key = [7u8; 64];
    let mk = fscrypt::MasterKey::new(&key).unwrap();
    let policy = fscrypt::PolicyV2::new_default(mk.identifier());
    let backing = std::path::Path::new(&a[1]);
    if !backing.join("fscrypt.dir").exists() {
        fscrypt_fuse::create_root(backing, &policy).unwrap();
    }
    let cfg = fscrypt_fuse::MountConfig {
        backing_dir: backing.into(),
        policy,
        master_key: Some(mk),
        read_only: false,
        allow_other: true,
        default_permissions: std::env::var_os("DP").is_some(),
        fs_name: "dev".into(),
    };
    fscrypt_fuse::mount(cfg, std::path::Path::new(&a[2])).unwrap();
}
