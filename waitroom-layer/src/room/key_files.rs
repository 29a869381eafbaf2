//! The key files of a room's data directory ([`RoomBuilder::data_dir`](crate::RoomBuilder::data_dir)), also shared
//! by several gateway processes: the token signing key and the session-cookie secret, created on first start (mode
//! 0600, in a directory created 0700) and read by every later start, so a restarted room accepts the cookies and
//! passes it issued before, and instances on one machine need no extra step.

use std::io::{self, Write as _};
use std::path::{Path, PathBuf};

use waitroom_verify::SigningKey;

use crate::room::WaitingRoom;
use crate::room::builder::MIN_COOKIE_SECRET_BYTES;

/// The signing key's file name in the data directory.
pub const SIGNING_KEY_FILE: &str = "signing-key.pem";

/// The cookie secret's file name in the data directory.
pub const COOKIE_SECRET_FILE: &str = "cookie-secret";

/// Creates the directory `dir` (and its missing parents) readable by its owner only (mode 0700) unless it exists.
pub(crate) fn create_private_dir(dir: &Path) -> io::Result<()> {
    if dir.as_os_str().is_empty() || dir.is_dir() {
        return Ok(());
    }
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir)
}

/// Creates `path` with `contents` unless it exists, atomically: the file appears complete or not at all, and when
/// several processes race, exactly one wins and the others read its file. Returns the file's contents.
fn create_once(path: &Path, contents: impl FnOnce() -> io::Result<String>) -> io::Result<String> {
    match std::fs::read_to_string(path) {
        Ok(existing) => {
            warn_if_readable_by_others(path);
            return Ok(existing);
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    if let Some(dir) = path.parent() {
        create_private_dir(dir)?;
    }
    let tmp = temp_name(path);
    {
        let mut opts = std::fs::OpenOptions::new();
        opts.write(true).create_new(true);
        #[cfg(unix)]
        std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
        let mut f = opts.open(&tmp)?;
        f.write_all(contents()?.as_bytes())?;
        f.sync_all()?;
    }
    // A hard link fails if `path` exists: the first complete file wins, and nobody reads a half-written one.
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => tracing::info!(path = %path.display(), "created"),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(e),
    }
    std::fs::read_to_string(path)
}

fn temp_name(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        &WaitingRoom::new_session_id()[..6]
    ));
    path.with_file_name(name)
}

fn warn_if_readable_by_others(path: &Path) {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(m) = std::fs::metadata(path)
            && m.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(path = %path.display(), "secret file is readable by other users; chmod 600 it");
        }
    }
    #[cfg(not(unix))]
    let _ = path;
}

fn invalid(path: &Path, what: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{}: {what}", path.display()),
    )
}

/// The room's token signing key from the PKCS#8 PEM file at `path`, generating a fresh Ed25519 key there first if
/// the file does not exist. The key id is derived from the public key (`gw-` and its first 12 characters), so every
/// process reading the file signs with the same `kid`.
///
/// # Errors
/// When the file cannot be read or created, or holds no Ed25519 or P-256 private key.
pub fn load_or_create_signing_key(path: &Path) -> io::Result<SigningKey> {
    let pem = create_once(path, || {
        let key = SigningKey::generate_ed25519("new").map_err(io::Error::other)?;
        key.to_pem()
            .ok_or_else(|| io::Error::other("the key has no PEM form"))
    })?;
    let probe = SigningKey::from_pem("probe", &pem)
        .map_err(|e| invalid(path, &format!("not a private key in PEM: {e}")))?;
    let jwk = probe.verifying_key().to_jwk().unwrap_or_default();
    let public = jwk
        .get("x")
        .and_then(|v| v.as_str())
        .unwrap_or("key")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric())
        .take(12)
        .collect::<String>();
    SigningKey::from_pem(format!("gw-{public}"), &pem).map_err(|e| invalid(path, &e.to_string()))
}

/// The session-cookie secret from the file at `path` (its trimmed text, at least 32 bytes), writing 256 random
/// bits there first (base64url) if the file does not exist.
///
/// # Errors
/// When the file cannot be read or created, or is shorter than 32 bytes.
pub fn load_or_create_cookie_secret(path: &Path) -> io::Result<Vec<u8>> {
    let text = create_once(path, || {
        Ok(format!(
            "{}{}\n",
            WaitingRoom::new_session_id(),
            WaitingRoom::new_session_id()
        ))
    })?;
    let secret = text.trim().as_bytes().to_vec();
    if secret.len() < MIN_COOKIE_SECRET_BYTES {
        return Err(invalid(
            path,
            &format!("a cookie secret needs at least {MIN_COOKIE_SECRET_BYTES} bytes"),
        ));
    }
    Ok(secret)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_are_created_once_private_and_read_back() {
        let top =
            std::env::temp_dir().join(format!("waitroom-files-{}", WaitingRoom::new_session_id()));
        // The data directory does not exist yet: the first file creates it, private.
        let dir = top.join(".waitroom");
        let key_path = dir.join(SIGNING_KEY_FILE);
        let a = load_or_create_signing_key(&key_path).unwrap();
        let b = load_or_create_signing_key(&key_path).unwrap();
        assert_eq!(a.kid(), b.kid());
        assert!(a.kid().starts_with("gw-"));
        assert_eq!(a.to_pem(), b.to_pem());
        let s1 = load_or_create_cookie_secret(&dir.join("cookie")).unwrap();
        let s2 = load_or_create_cookie_secret(&dir.join("cookie")).unwrap();
        assert_eq!(s1, s2);
        assert!(s1.len() >= 32);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt as _;
            let mode = std::fs::metadata(&key_path).unwrap().permissions().mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(dir.join("cookie"))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
            let mode = std::fs::metadata(&dir).unwrap().permissions().mode();
            assert_eq!(
                mode & 0o777,
                0o700,
                "the data directory is its owner's only"
            );
        }
        std::fs::write(dir.join("short"), "too short").unwrap();
        assert!(load_or_create_cookie_secret(&dir.join("short")).is_err());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            3,
            "no temp files left"
        );
        std::fs::remove_dir_all(&top).unwrap();
    }
}
