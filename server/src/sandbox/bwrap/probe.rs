//! `BwrapDriver::probe`: whether sandboxes can run here, checked at
//! startup by running `/bin/true` in a sandbox of this driver's layout.

use std::io::Read;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{Context, bail};

use super::host::{find_bwrap, open_relay, relay_binary};
use super::{BwrapDriver, Layout, bwrap_args};
use crate::fix::WithFix;

impl BwrapDriver {
    /// Whether sandboxes can run here: `bwrap` exists, can create every
    /// namespace with this driver's layout (it runs `/bin/true` in one,
    /// ~20 ms; blocking, meant for startup), Chromium is runnable, and the
    /// `cordon` binary for the relay is found.
    pub fn probe(chromium: &Path) -> anyhow::Result<()> {
        let bwrap = find_bwrap()?;
        if !crate::sandbox::chromium_runnable(chromium) {
            return Err(anyhow::anyhow!(
                "{} is not an executable file",
                chromium.display()
            ))
            .fix(
                "install Debian's chromium package (infra/scripts/setup.sh does), or set \
                 chromium_path (CORDON_CHROMIUM_PATH) to the browser's binary",
            );
        }
        let relay = open_relay(&relay_binary()?)?;
        let dir = std::env::temp_dir().join(format!(
            "cordon-bwrap-probe-{}-{:08x}",
            std::process::id(),
            rand::random::<u32>()
        ));
        std::fs::create_dir(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let result = Self::probe_in(&bwrap, &dir, relay, chromium);
        let _ = std::fs::remove_dir_all(&dir);
        result
    }

    fn probe_in(
        bwrap: &Path,
        dir: &Path,
        relay: std::fs::File,
        chromium: &Path,
    ) -> anyhow::Result<()> {
        let (uploads_dir, downloads_dir) = (dir.join("uploads"), dir.join("downloads"));
        for d in [&uploads_dir, &downloads_dir] {
            std::fs::create_dir(d).with_context(|| format!("cannot create {}", d.display()))?;
        }
        let layout = Layout {
            sock_dir: dir,
            uploads_dir: &uploads_dir,
            downloads_dir: &downloads_dir,
            chromium,
            // As the driver will run it.
            disable_userns: nix::unistd::geteuid().is_root(),
            // Sizes are an extra that older bwraps lack (`takes_size`).
            tmpfs_bytes: None,
        };
        let mut child = Command::new(bwrap)
            .args(bwrap_args(&layout, &["/bin/true".into()]))
            .stdin(Stdio::null())
            .stdout(relay)
            .stderr(Stdio::piped())
            .process_group(0)
            .spawn()
            .with_context(|| format!("cannot run {}", bwrap.display()))?;
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        let status = loop {
            if let Some(status) = child.try_wait()? {
                break status;
            }
            if std::time::Instant::now() >= deadline {
                let _ = child.kill();
                let _ = child.wait();
                bail!("bwrap did not finish a trivial sandbox within 5 s");
            }
            std::thread::sleep(Duration::from_millis(5));
        };
        if !status.success() {
            let mut err = String::new();
            if let Some(mut e) = child.stderr.take() {
                let _ = e.read_to_string(&mut err);
            }
            return Err(anyhow::anyhow!(
                "bwrap cannot create the sandbox's namespaces here ({status}): {}",
                err.trim()
            ))
            .fix(
                "allow user namespaces where Cordon runs (sysctl user.max_user_namespaces above 0; \
                 in Docker, a seccomp profile that allows them and --security-opt \
                 systempaths=unconfined; under systemd, the shipped unit), or set \
                 sandbox_driver = \"process\" on a host without other local users",
            );
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn the_probe_passes_where_bwrap_works() {
        // This machine has bwrap and user namespaces; elsewhere the probe
        // must fail with a reason rather than panic.
        match BwrapDriver::probe(Path::new("/usr/lib/chromium/chromium")) {
            Ok(()) => {}
            Err(e) => assert!(!format!("{e:#}").is_empty()),
        }
        let err = BwrapDriver::probe(Path::new("/nonexistent/chromium")).unwrap_err();
        assert!(
            format!("{err:#}").contains("/nonexistent/chromium"),
            "{err:#}"
        );
    }
}
