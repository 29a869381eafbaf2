//! The operator's kit in the shipped binaries: admin tokens and metrics from files or the environment (never from
//! the command line, where `ps` and shell history would show them), put on the room layer.

use std::path::Path;

use waitroom_layer::WaitingRoomLayerBuilder;

/// The environment variable that may hold the admin tokens (the admin token file's format) instead of a file.
pub const ADMIN_TOKENS_ENV: &str = "WAITROOM_ADMIN_TOKENS";
/// The environment variable that may hold the metrics token instead of a file.
pub const METRICS_TOKEN_ENV: &str = "WAITROOM_METRICS_TOKEN";

/// The operator's settings: who may use the admin API and the status page, and whether (and behind what) the
/// metrics are served. Secrets are never printed.
#[derive(Default, Clone)]
pub struct OpsOptions {
    /// Admin tokens as (name, secret).
    pub admin_tokens: Vec<(String, String)>,
    /// Serve `/waitroom/metrics`.
    pub metrics: bool,
    /// The metrics endpoint's bearer secret, if any (turns metrics on).
    pub metrics_token: Option<String>,
}

impl std::fmt::Debug for OpsOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.admin_tokens.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("OpsOptions")
            .field("admin_tokens", &names)
            .field("metrics", &self.metrics)
            .field(
                "metrics_token",
                &self.metrics_token.as_ref().map(|_| "[redacted]"),
            )
            .finish()
    }
}

impl OpsOptions {
    /// Reads the admin tokens from `admin_file` (or, without it, from [`ADMIN_TOKENS_ENV`]) and the metrics token
    /// from `metrics_file` (or [`METRICS_TOKEN_ENV`]).
    ///
    /// # Errors
    /// A file that cannot be read, or tokens that do not parse (see [`parse_admin_tokens`]).
    pub fn load(
        admin_file: Option<&Path>,
        metrics: bool,
        metrics_file: Option<&Path>,
    ) -> Result<Self, String> {
        let admin_text = match admin_file {
            Some(p) => Some(read_secret_file(p, "--admin-token-file")?),
            None => std::env::var(ADMIN_TOKENS_ENV).ok(),
        };
        let admin_tokens = match admin_text {
            Some(t) => parse_admin_tokens(&t).map_err(|e| match admin_file {
                Some(p) => format!("--admin-token-file {}: {e}", p.display()),
                None => format!("{ADMIN_TOKENS_ENV}: {e}"),
            })?,
            None => Vec::new(),
        };
        let metrics_token = match metrics_file {
            Some(p) => Some(read_secret_file(p, "--metrics-token-file")?),
            None => std::env::var(METRICS_TOKEN_ENV).ok(),
        }
        .map(|t| t.trim().to_owned())
        .filter(|t| !t.is_empty());
        Ok(Self {
            admin_tokens,
            metrics: metrics || metrics_token.is_some(),
            metrics_token,
        })
    }

    /// Puts the tokens and the metrics on a room layer's builder.
    pub fn apply(&self, mut b: WaitingRoomLayerBuilder) -> WaitingRoomLayerBuilder {
        for (name, secret) in &self.admin_tokens {
            b = b.admin_token_named(name.clone(), secret);
        }
        if self.metrics {
            b = b.metrics(true);
        }
        if let Some(t) = &self.metrics_token {
            b = b.metrics_token(t);
        }
        b
    }

    /// What to print at start-up about the kit (names and paths, never a secret).
    pub fn describe(&self, base_url: &str) -> Vec<String> {
        let mut lines = Vec::new();
        if !self.admin_tokens.is_empty() {
            let names: Vec<&str> = self.admin_tokens.iter().map(|(n, _)| n.as_str()).collect();
            lines.push(format!(
                "  status page: {base_url}/waitroom/admin/ (admin tokens: {})",
                names.join(", ")
            ));
        }
        if self.metrics {
            lines.push(format!(
                "  metrics: {base_url}/waitroom/metrics{}",
                if self.metrics_token.is_some() {
                    " (bearer token required)"
                } else {
                    ""
                }
            ));
        }
        lines
    }
}

fn read_secret_file(p: &Path, flag: &str) -> Result<String, String> {
    let text = std::fs::read_to_string(p).map_err(|e| format!("{flag} {}: {e}", p.display()))?;
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        if let Ok(meta) = std::fs::metadata(p)
            && meta.permissions().mode() & 0o077 != 0
        {
            tracing::warn!(
                file = %p.display(),
                "{flag}: the file is readable by others than its owner (chmod 600 it)"
            );
        }
    }
    Ok(text)
}

/// Parses admin tokens, one a line: `name:secret`, or a bare secret (named `admin`). Blank lines and lines
/// starting with `#` are skipped. A name is 1 to 32 letters, digits, `-`, `_` or `@`; a secret at least 16 bytes.
///
/// # Errors
/// A line that does not parse (the error names its line number, never its text), or no token at all.
pub fn parse_admin_tokens(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (name, secret) = match line.split_once(':') {
            Some((n, s)) if is_name(n) => (n.to_owned(), s.trim().to_owned()),
            _ => ("admin".to_owned(), line.to_owned()),
        };
        if secret.len() < 16 {
            return Err(format!(
                "line {}: a secret must be at least 16 bytes (use e.g. `openssl rand -base64 32`)",
                i + 1
            ));
        }
        if out.iter().any(|(n, _)| *n == name) {
            return Err(format!("line {}: a second token named `{name}`", i + 1));
        }
        out.push((name, secret));
    }
    if out.is_empty() {
        return Err("no token in it".into());
    }
    Ok(out)
}

fn is_name(n: &str) -> bool {
    (1..=32).contains(&n.len())
        && n.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'@'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn admin_token_lines_name_their_operator_or_default_to_admin() {
        let t = parse_admin_tokens(
            "# on-sale day\nalice:0123456789abcdef-alice\n\nbob: 0123456789abcdef-bob \n0123456789abcdef-bare\n",
        )
        .unwrap();
        let names: Vec<&str> = t.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["alice", "bob", "admin"]);
        assert_eq!(t[1].1, "0123456789abcdef-bob");
        let short = parse_admin_tokens("carol:tooshort").unwrap_err();
        assert!(
            short.contains("line 1") && !short.contains("tooshort"),
            "{short}"
        );
        assert!(parse_admin_tokens("# nothing\n").is_err());
        assert!(parse_admin_tokens("a:0123456789abcdef\na:0123456789abcdeg").is_err());
        let o = OpsOptions {
            admin_tokens: t,
            metrics: true,
            metrics_token: Some("0123456789abcdef-metrics".into()),
        };
        let shown = format!("{o:?}");
        assert!(!shown.contains("0123456789abcdef"), "{shown}");
    }
}
