//! Per-sandbox resource limits on this host: one cgroup per sandbox for
//! memory, task count and CPU share (cgroup v2 where the unified hierarchy
//! is mounted with those controllers, else the v1 controllers), an
//! open-files rlimit set in the child before it runs, and (bwrap) size caps
//! on the sandbox's tmpfs mounts.
//!
//! The cgroups are made *under the control plane's own* cgroup of each
//! controller, so Cordon never moves anything out of where its supervisor
//! put it. On cgroup v2 that cgroup may hand controllers to children only
//! once no process sits in it, so a control plane alone in its cgroup (a
//! systemd unit with `Delegate=yes`, a container) first moves itself into
//! the leaf `control-plane` beside the sandboxes' cgroups ([`delegate_v2`]).
//! The browser joins them itself: it is started through `/bin/sh`,
//! which writes `0` to each `cgroup.procs`, sets the open-files limit and
//! then execs the browser (or bwrap), so no process of the sandbox ever runs
//! outside its limits. (A `pre_exec` hook would do the same, but it makes
//! Rust fork the whole control plane instead of `posix_spawn`ing, which
//! measurably slowed every cold start.)

use std::io;
use std::path::{Path, PathBuf};

/// One tenant's own session limits; those unset are the `session_*` settings.
#[derive(
    Debug,
    Clone,
    Copy,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(deny_unknown_fields)]
pub struct TenantLimits {
    /// Memory per session, MiB.
    pub memory_mb: Option<u64>,
    /// Processes and threads per session.
    pub pids_max: Option<u64>,
    /// CPU weight per session.
    pub cpu_weight: Option<u64>,
    /// Disk for the tenant's screenshots, MiB.
    pub recording_quota_mb: Option<u64>,
}

impl TenantLimits {
    /// `base` with this tenant's own values in place.
    pub fn over(&self, base: Limits) -> Limits {
        Limits {
            memory_bytes: self.memory_mb.map_or(base.memory_bytes, |mb| mb << 20),
            pids: self.pids_max.unwrap_or(base.pids),
            cpu_weight: self.cpu_weight.unwrap_or(base.cpu_weight),
            ..base
        }
    }
}

/// The limits every session's sandbox gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Memory (resident and tmpfs pages), bytes.
    pub memory_bytes: u64,
    /// Tasks (processes and threads).
    pub pids: u64,
    /// Open files per process.
    pub open_files: u64,
    /// Size of each of the sandbox's tmpfs mounts (bwrap), bytes.
    pub tmpfs_bytes: u64,
    /// CPU weight relative to other sessions (cgroup v2 scale, 1–10000;
    /// every session gets the same by default, so none starves the others).
    pub cpu_weight: u64,
}

/// Which limit a sandbox ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Breach {
    /// The kernel killed a process of the sandbox for memory.
    Memory,
    /// A process or thread could not be started: the task limit.
    Pids,
}

impl Breach {
    /// What the session's error says.
    pub fn describe(self, limits: &Limits) -> String {
        match self {
            Self::Memory => format!(
                "the page exceeded the session's memory limit ({} MiB)",
                limits.memory_bytes / (1024 * 1024)
            ),
            Self::Pids => format!(
                "the page exceeded the session's process and thread limit ({})",
                limits.pids
            ),
        }
    }
}

/// How this host enforces the limits.
#[derive(Debug, Clone)]
enum Mode {
    /// One directory in the unified hierarchy.
    V2 { parent: PathBuf },
    /// One directory per v1 controller (those that are writable here).
    V1 {
        memory: Option<PathBuf>,
        pids: Option<PathBuf>,
        cpu: Option<PathBuf>,
    },
    /// No cgroup can be made here; only rlimits and tmpfs sizes apply.
    None { reason: String },
    /// Switched off by the settings: nothing applies.
    Off,
}

/// What `/readyz` and the start-up log say about the limits.
#[derive(Debug, Clone, serde::Serialize)]
pub struct LimitsStatus {
    /// `cgroup-v2`, `cgroup-v1` or `none`.
    pub cgroups: &'static str,
    /// Memory is bounded per session.
    pub memory: bool,
    /// Tasks are bounded per session.
    pub pids: bool,
    /// CPU is shared fairly between sessions.
    pub cpu: bool,
    /// Why not, when something is missing.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// The host's cgroup setup and the limits to apply; cheap to clone.
#[derive(Debug, Clone)]
pub struct Enforcer {
    limits: Limits,
    mode: Mode,
}

/// This process's cgroup path of `controller` (v1) or of the unified
/// hierarchy (`controller` = ""), from the text of `/proc/self/cgroup`.
fn own_path(proc_cgroup: &str, controller: &str) -> Option<String> {
    proc_cgroup.lines().find_map(|line| {
        let mut parts = line.splitn(3, ':');
        let (_, ctrls, path) = (parts.next()?, parts.next()?, parts.next()?);
        let hit = if controller.is_empty() {
            ctrls.is_empty()
        } else {
            ctrls.split(',').any(|c| c == controller)
        };
        hit.then(|| path.to_owned())
    })
}

/// Whether a child cgroup can be made (and removed) under `dir`.
fn writable(dir: &Path) -> Result<(), String> {
    // Unique per call: several engines may probe at once in one process.
    let probe = dir.join(format!(
        "cordon-probe-{}-{:08x}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir(&probe).map_err(|e| format!("{}: {e}", dir.display()))?;
    let _ = std::fs::remove_dir(&probe);
    Ok(())
}

/// The cgroup v2 leaf the control plane's own processes move into, beside
/// the sandboxes' `cordon-…` cgroups (so never a `cordon-` name).
pub const V2_LEAF: &str = "control-plane";

/// The cgroup v2 directory the sandboxes' cgroups go under, for a process
/// whose unified-hierarchy path is `own`: its own cgroup, or the parent of
/// the [`V2_LEAF`] it already moved into (so a second look is idempotent).
fn v2_parent(root: &Path, own: &str) -> PathBuf {
    let dir = root.join(own.trim_start_matches('/'));
    match (dir.file_name(), dir.parent()) {
        (Some(leaf), Some(up)) if leaf == V2_LEAF && dir != root => up.to_path_buf(),
        _ => dir,
    }
}

fn v2_list(dir: &Path, file: &str) -> Vec<String> {
    std::fs::read_to_string(dir.join(file))
        .unwrap_or_default()
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// Makes the cgroup v2 directory `dir` hand the `wanted` controllers (those
/// of them it has) to its children, and returns the ones it now hands on.
///
/// The kernel lets a cgroup enable controllers for its children only while
/// no process sits in it (the root excepted). So when enabling is refused,
/// the processes in `dir` are moved into `dir/`[`V2_LEAF`] first, but only
/// if every one of them is in `own` (the control plane alone in a cgroup
/// given to it: systemd's `Delegate=yes`, a container): Cordon never moves
/// anyone else's process. Each step is checked; on refusal nothing is moved.
pub fn delegate_v2(dir: &Path, own: &[u32], wanted: &[&str]) -> Result<Vec<String>, String> {
    let available = v2_list(dir, "cgroup.controllers");
    let wanted: Vec<&str> = wanted
        .iter()
        .copied()
        .filter(|c| available.iter().any(|a| a == c))
        .collect();
    let enable = || {
        for c in &wanted {
            // One at a time: a controller the kernel will not hand on must
            // not stop the others.
            let _ = std::fs::write(dir.join("cgroup.subtree_control"), format!("+{c}"));
        }
        let on = v2_list(dir, "cgroup.subtree_control");
        wanted
            .iter()
            .filter(|c| on.iter().any(|o| o == *c))
            .map(|c| (*c).to_owned())
            .collect::<Vec<_>>()
    };
    let enabled = enable();
    if enabled.len() == wanted.len() {
        return Ok(enabled);
    }
    let procs = |d: &Path| -> Vec<u32> {
        v2_list(d, "cgroup.procs")
            .iter()
            .filter_map(|p| p.parse().ok())
            .collect()
    };
    let inside = procs(dir);
    if inside.is_empty() {
        // Nothing to move, yet refused: the kernel's or the supervisor's word.
        return Ok(enabled);
    }
    let strangers: Vec<u32> = inside
        .iter()
        .copied()
        .filter(|p| !own.contains(p))
        .collect();
    if !strangers.is_empty() {
        return Err(format!(
            "cgroup v2: {} holds processes other than Cordon's ({} of them), so it cannot \
             hand memory and pids to the sessions' cgroups; run Cordon in a cgroup of its own \
             (systemd: Delegate=yes)",
            dir.display(),
            strangers.len()
        ));
    }
    let leaf = dir.join(V2_LEAF);
    match std::fs::create_dir(&leaf) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cgroup v2: {}: {e}", leaf.display())),
    }
    // A process started while moving lands in `dir` too: a few rounds.
    for _ in 0..5 {
        let left = procs(dir);
        if left.is_empty() {
            break;
        }
        for pid in left {
            if !own.contains(&pid) {
                return Err(format!(
                    "cgroup v2: a process other than Cordon's joined {} while moving",
                    dir.display()
                ));
            }
            std::fs::write(leaf.join("cgroup.procs"), pid.to_string())
                .map_err(|e| format!("cgroup v2: moving into {}: {e}", leaf.display()))?;
        }
    }
    Ok(enable())
}

impl Enforcer {
    /// Finds how this host can enforce `limits` (checked by making and
    /// removing a probe cgroup), under `root` (normally `/sys/fs/cgroup`).
    pub fn detect(limits: Limits, root: &Path) -> Self {
        let text = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        let under = |sub: &Path, path: &str| sub.join(path.trim_start_matches('/'));
        // cgroup v2: the unified hierarchy at the root, with our controllers.
        let unified = if root.join("cgroup.controllers").is_file() {
            Some(root.to_path_buf())
        } else {
            None
        };
        let mut v2_reason = None;
        if let (Some(v2root), Some(path)) = (unified, own_path(&text, "")) {
            let parent = v2_parent(&v2root, &path);
            let before = v2_list(&parent, "cgroup.procs");
            match delegate_v2(&parent, &[std::process::id()], &["memory", "pids", "cpu"]) {
                Ok(on) => {
                    let has = |c: &str| on.iter().any(|x| x == c);
                    if has("memory") && has("pids") && writable(&parent).is_ok() {
                        if !before.is_empty() && v2_list(&parent, "cgroup.procs").is_empty() {
                            tracing::info!(
                                cgroup = %parent.join(V2_LEAF).display(),
                                "cgroup v2: the control plane moved into a leaf of its cgroup, \
                                 which now hands memory and pids to the sessions' cgroups"
                            );
                        }
                        return Self {
                            limits,
                            mode: Mode::V2 { parent },
                        };
                    }
                    v2_reason = Some(format!(
                        "cgroup v2: {} cannot hand memory and pids to child cgroups (it has: {})",
                        parent.display(),
                        v2_list(&parent, "cgroup.controllers").join(" ")
                    ));
                }
                Err(e) => v2_reason = Some(e),
            }
        }
        let v1 = |controller: &str| -> Result<PathBuf, String> {
            let path = own_path(&text, controller)
                .ok_or_else(|| format!("no {controller} cgroup for this process"))?;
            let dir = under(&root.join(controller), &path);
            writable(&dir)?;
            Ok(dir)
        };
        let (memory, pids, cpu) = (v1("memory"), v1("pids"), v1("cpu"));
        if memory.is_err() && pids.is_err() {
            let reason = v2_reason.unwrap_or_else(|| memory.err().unwrap_or_default());
            return Self {
                limits,
                mode: Mode::None {
                    reason: format!("no writable cgroup for the limits ({reason})"),
                },
            };
        }
        Self {
            limits,
            mode: Mode::V1 {
                memory: memory.ok(),
                pids: pids.ok(),
                cpu: cpu.ok(),
            },
        }
    }

    /// No limits at all (`session_limits = false`).
    pub fn disabled(limits: Limits) -> Self {
        Self {
            limits,
            mode: Mode::Off,
        }
    }

    /// The limits applied.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// What is enforced here.
    pub fn status(&self) -> LimitsStatus {
        match &self.mode {
            Mode::V2 { .. } => LimitsStatus {
                cgroups: "cgroup-v2",
                memory: true,
                pids: true,
                cpu: true,
                reason: None,
            },
            Mode::V1 { memory, pids, cpu } => LimitsStatus {
                cgroups: "cgroup-v1",
                memory: memory.is_some(),
                pids: pids.is_some(),
                cpu: cpu.is_some(),
                reason: (memory.is_none() || pids.is_none() || cpu.is_none())
                    .then(|| "some cgroup v1 controllers are not writable here".to_owned()),
            },
            Mode::None { reason } => LimitsStatus {
                cgroups: "none",
                memory: false,
                pids: false,
                cpu: false,
                reason: Some(reason.clone()),
            },
            Mode::Off => LimitsStatus {
                cgroups: "off",
                memory: false,
                pids: false,
                cpu: false,
                reason: Some("session_limits = false".into()),
            },
        }
    }

    /// Whether anything is applied at all.
    pub fn enabled(&self) -> bool {
        !matches!(self.mode, Mode::Off)
    }

    /// Removes the (empty) cgroups a sandbox of an earlier run left behind.
    pub fn remove_stale(&self, id: &str) {
        let name = format!("cordon-{id}");
        let parents: Vec<&PathBuf> = match &self.mode {
            Mode::V2 { parent } => vec![parent],
            Mode::V1 { memory, pids, cpu } => [memory, pids, cpu].into_iter().flatten().collect(),
            Mode::None { .. } | Mode::Off => vec![],
        };
        for p in parents {
            let _ = std::fs::remove_dir(p.join(&name));
        }
    }

    /// The limits of a sandbox that runs elsewhere (the `exec` driver's
    /// engine enforces them): numbers to pass on, no cgroup here.
    pub fn remote(&self) -> SandboxLimits {
        SandboxLimits {
            version: Version::V1,
            dirs: Vec::new(),
            procs: Vec::new(),
            limits: std::sync::Mutex::new(self.limits),
        }
    }

    /// Makes the cgroup(s) of sandbox `id` with the limits written in.
    pub fn create(&self, id: &str) -> io::Result<SandboxLimits> {
        let name = format!("cordon-{id}");
        let mut dirs = Vec::new();
        let mut made = |dir: PathBuf| -> io::Result<PathBuf> {
            std::fs::create_dir(&dir)?;
            dirs.push(dir.clone());
            Ok(dir)
        };
        let l = &self.limits;
        let result = (|| -> io::Result<(Version, Vec<PathBuf>)> {
            match &self.mode {
                Mode::V2 { parent } => {
                    let dir = made(parent.join(&name))?;
                    write(&dir, "memory.max", l.memory_bytes)?;
                    // No swap: a page that outgrows memory is stopped, not paged.
                    let _ = write(&dir, "memory.swap.max", 0);
                    write(&dir, "pids.max", l.pids)?;
                    let _ = write(&dir, "cpu.weight", l.cpu_weight);
                    Ok((Version::V2, vec![dir]))
                }
                Mode::V1 { memory, pids, cpu } => {
                    let mut joined = Vec::new();
                    if let Some(m) = memory {
                        let dir = made(m.join(&name))?;
                        write(&dir, "memory.limit_in_bytes", l.memory_bytes)?;
                        let _ = write(&dir, "memory.memsw.limit_in_bytes", l.memory_bytes);
                        joined.push(dir);
                    }
                    if let Some(p) = pids {
                        let dir = made(p.join(&name))?;
                        write(&dir, "pids.max", l.pids)?;
                        joined.push(dir);
                    }
                    if let Some(c) = cpu {
                        let dir = made(c.join(&name))?;
                        // v1 shares: 1024 is the default weight 100.
                        write(&dir, "cpu.shares", (l.cpu_weight * 1024 / 100).max(2))?;
                        joined.push(dir);
                    }
                    Ok((Version::V1, joined))
                }
                Mode::None { .. } | Mode::Off => Ok((Version::V1, Vec::new())),
            }
        })();
        match result {
            Ok((version, joined)) => {
                let procs = joined.iter().map(|d| d.join("cgroup.procs")).collect();
                Ok(SandboxLimits {
                    version,
                    dirs,
                    procs,
                    limits: std::sync::Mutex::new(*l),
                })
            }
            Err(e) => {
                for d in dirs.iter().rev() {
                    let _ = std::fs::remove_dir(d);
                }
                Err(e)
            }
        }
    }
}

fn write(dir: &Path, file: &str, value: u64) -> io::Result<()> {
    std::fs::write(dir.join(file), value.to_string())
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", dir.join(file).display())))
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    V1,
    V2,
}

/// One sandbox's cgroups: joined by its first process, read for breaches,
/// removed when it stops.
#[derive(Debug)]
pub struct SandboxLimits {
    version: Version,
    dirs: Vec<PathBuf>,
    /// `cgroup.procs` of each directory.
    procs: Vec<PathBuf>,
    limits: std::sync::Mutex<Limits>,
}

impl SandboxLimits {
    /// The limits applied now.
    pub fn limits(&self) -> Limits {
        *self.limits.lock().expect("limits lock")
    }

    /// Changes the memory, task and CPU limits of the running sandbox (a
    /// tenant's own, when its warm browser is handed out). The open-files
    /// and tmpfs limits stay as they were set at start.
    pub fn retune(&self, to: Limits) -> io::Result<()> {
        for dir in &self.dirs {
            let has = |f: &str| dir.join(f).exists();
            match self.version {
                Version::V2 => {
                    write(dir, "memory.max", to.memory_bytes)?;
                    write(dir, "pids.max", to.pids)?;
                    if has("cpu.weight") {
                        write(dir, "cpu.weight", to.cpu_weight)?;
                    }
                }
                Version::V1 => {
                    if has("memory.limit_in_bytes") {
                        // memsw must stay ≥ the memory limit: order matters.
                        let raising = to.memory_bytes > self.limits().memory_bytes;
                        if raising && has("memory.memsw.limit_in_bytes") {
                            write(dir, "memory.memsw.limit_in_bytes", to.memory_bytes)?;
                        }
                        write(dir, "memory.limit_in_bytes", to.memory_bytes)?;
                        if !raising && has("memory.memsw.limit_in_bytes") {
                            write(dir, "memory.memsw.limit_in_bytes", to.memory_bytes)?;
                        }
                    }
                    if has("pids.max") {
                        write(dir, "pids.max", to.pids)?;
                    }
                    if has("cpu.shares") {
                        write(dir, "cpu.shares", (to.cpu_weight * 1024 / 100).max(2))?;
                    }
                }
            }
        }
        let mut l = self.limits.lock().expect("limits lock");
        (l.memory_bytes, l.pids, l.cpu_weight) = (to.memory_bytes, to.pids, to.cpu_weight);
        Ok(())
    }

    /// A command that runs `program` inside the limits: `/bin/sh` joins the
    /// cgroups, sets the open-files limit and execs `program`; the caller
    /// adds `program`'s arguments. Its pid stays the program's.
    pub fn command(&self, program: &Path) -> std::process::Command {
        let quote = |p: &Path| format!("'{}'", p.display().to_string().replace('\'', r"'\''"));
        let mut script = String::from("set -e; ");
        for p in &self.procs {
            script.push_str(&format!("echo 0 > {}; ", quote(p)));
        }
        // Never above this process's own hard limit, which an unprivileged
        // shell could not raise (and `set -e` would end the start).
        let hard = nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)
            .map_or(u64::MAX, |(_, hard)| hard);
        script.push_str(&format!(
            "ulimit -n {}; exec \"$0\" \"$@\"",
            self.limits().open_files.min(hard)
        ));
        let mut cmd = std::process::Command::new("/bin/sh");
        cmd.arg("-c").arg(script).arg(program);
        cmd
    }

    /// The limit the sandbox ran into, if any.
    pub fn breach(&self) -> Option<Breach> {
        let read = |file: &str| {
            self.dirs
                .iter()
                .find_map(|d| std::fs::read_to_string(d.join(file)).ok())
                .unwrap_or_default()
        };
        let count = |text: &str, key: &str| -> u64 {
            text.lines()
                .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
                .unwrap_or(0)
        };
        let oom = match self.version {
            Version::V2 => count(&read("memory.events"), "oom_kill "),
            Version::V1 => count(&read("memory.oom_control"), "oom_kill "),
        };
        if oom > 0 {
            return Some(Breach::Memory);
        }
        if count(&read("pids.events"), "max ") > 0 {
            return Some(Breach::Pids);
        }
        None
    }

    /// Removes the cgroups once their processes are gone (a few tries:
    /// the kernel empties a cgroup shortly after its last task exits).
    pub async fn remove(&self) {
        for d in self.dirs.iter().rev() {
            for _ in 0..50 {
                match std::fs::remove_dir(d) {
                    Ok(()) => break,
                    Err(e) if e.kind() == io::ErrorKind::NotFound => break,
                    Err(_) => tokio::time::sleep(std::time::Duration::from_millis(20)).await,
                }
            }
        }
    }
}

impl Drop for SandboxLimits {
    fn drop(&mut self) {
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const PROC_V1: &str =
        "9:name=systemd:/\n8:pids:/\n4:memory:/process_api/abc\n2:cpuacct:/\n1:cpu:/\n0::/\n";

    #[test]
    fn own_cgroup_paths_are_read_per_controller() {
        assert_eq!(
            own_path(PROC_V1, "memory").as_deref(),
            Some("/process_api/abc")
        );
        assert_eq!(own_path(PROC_V1, "pids").as_deref(), Some("/"));
        assert_eq!(own_path(PROC_V1, "cpu").as_deref(), Some("/"));
        assert_eq!(own_path(PROC_V1, "").as_deref(), Some("/"));
        assert_eq!(
            own_path("0::/user.slice/x\n", "").as_deref(),
            Some("/user.slice/x")
        );
        assert_eq!(own_path("0::/x\n", "memory"), None);
    }

    #[test]
    fn the_v2_parent_of_a_process_already_in_its_leaf_is_the_cgroup_above() {
        let root = Path::new("/sys/fs/cgroup");
        assert_eq!(
            v2_parent(root, "/system.slice/cordon.service"),
            root.join("system.slice/cordon.service")
        );
        assert_eq!(
            v2_parent(root, "/system.slice/cordon.service/control-plane"),
            root.join("system.slice/cordon.service"),
            "a second look does not go one leaf deeper"
        );
        assert_eq!(v2_parent(root, "/"), root.to_path_buf());
        assert_eq!(v2_parent(root, "/control-plane"), root.to_path_buf());
    }

    /// Where the unified hierarchy is mounted, if it is.
    fn cgroup2_mount() -> Option<PathBuf> {
        let info = std::fs::read_to_string("/proc/self/mountinfo").ok()?;
        info.lines().find_map(|l| {
            let (left, right) = l.split_once(" - ")?;
            if right.split_whitespace().next() != Some("cgroup2") {
                return None;
            }
            left.split_whitespace().nth(4).map(PathBuf::from)
        })
    }

    /// A test cgroup under the unified root, with everything in it killed
    /// and removed at the end, whatever the test did.
    struct TestCgroup {
        dir: PathBuf,
        root: PathBuf,
        children: Vec<std::process::Child>,
        enabled_at_root: Option<String>,
    }

    impl Drop for TestCgroup {
        fn drop(&mut self) {
            for c in &mut self.children {
                let _ = c.kill();
                let _ = c.wait();
            }
            if let Ok(entries) = std::fs::read_dir(&self.dir) {
                for e in entries.flatten() {
                    if e.path().is_dir() {
                        let _ = std::fs::remove_dir(e.path());
                    }
                }
            }
            let _ = std::fs::remove_dir(&self.dir);
            if let Some(c) = &self.enabled_at_root {
                let _ = std::fs::write(self.root.join("cgroup.subtree_control"), format!("-{c}"));
            }
        }
    }

    fn v2_cgroup_of(pid: u32) -> String {
        let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
        own_path(&text, "").unwrap()
    }

    /// The leaf move against the real kernel. This machine binds memory and
    /// pids to cgroup v1, so the unified hierarchy has only a controller
    /// such as hugetlb: the kernel's rule (no controller for children while
    /// a process sits in the cgroup) is the same for every controller.
    #[test]
    fn a_v2_cgroup_with_only_cordon_in_it_hands_controllers_on_through_a_leaf() {
        let Some(root) = cgroup2_mount() else {
            eprintln!("skipped: no cgroup2 hierarchy is mounted here");
            return;
        };
        let available = v2_list(&root, "cgroup.controllers");
        let Some(controller) = available.first().cloned() else {
            eprintln!(
                "skipped: the cgroup2 hierarchy at {} has no controller",
                root.display()
            );
            return;
        };
        let on_at_root = v2_list(&root, "cgroup.subtree_control");
        let mut cg = TestCgroup {
            dir: root.join(format!(
                "cordon-test-leaf-{}-{:08x}",
                std::process::id(),
                rand::random::<u32>()
            )),
            root: root.clone(),
            children: Vec::new(),
            enabled_at_root: None,
        };
        if !on_at_root.contains(&controller) {
            std::fs::write(
                root.join("cgroup.subtree_control"),
                format!("+{controller}"),
            )
            .expect("enable the controller at the unified root");
            cg.enabled_at_root = Some(controller.clone());
        }
        if let Err(e) = std::fs::create_dir(&cg.dir) {
            eprintln!(
                "skipped: cannot make a cgroup under {}: {e}",
                root.display()
            );
            return;
        }
        let sleeper = || {
            std::process::Command::new("sleep")
                .arg("60")
                .spawn()
                .expect("sleep starts")
        };
        // "Cordon": one process put in the cgroup by its supervisor.
        cg.children.push(sleeper());
        let cordon = cg.children[0].id();
        std::fs::write(cg.dir.join("cgroup.procs"), cordon.to_string()).unwrap();
        let wanted = [controller.as_str(), "no-such-controller"];

        // The kernel's rule this works around.
        let direct = std::fs::write(
            cg.dir.join("cgroup.subtree_control"),
            format!("+{controller}"),
        );
        assert!(
            direct.is_err(),
            "the kernel let a cgroup with a process in it hand on {controller}"
        );

        // Someone else's process in the cgroup: refused, nothing moved.
        cg.children.push(sleeper());
        let stranger = cg.children[1].id();
        std::fs::write(cg.dir.join("cgroup.procs"), stranger.to_string()).unwrap();
        let err = delegate_v2(&cg.dir, &[cordon], &wanted).unwrap_err();
        assert!(
            err.contains("other than Cordon's (1 of them)") && err.contains("Delegate=yes"),
            "{err}"
        );
        let mut inside = v2_list(&cg.dir, "cgroup.procs");
        inside.sort();
        let mut expected = vec![cordon.to_string(), stranger.to_string()];
        expected.sort();
        assert_eq!(inside, expected, "nothing was moved");
        assert!(!cg.dir.join(V2_LEAF).exists(), "no leaf made on refusal");
        let mut s = cg.children.remove(1);
        s.kill().unwrap();
        s.wait().unwrap();

        // Alone: moved into the leaf, and the controller is handed on.
        let on = delegate_v2(&cg.dir, &[cordon], &wanted).unwrap();
        assert_eq!(on, vec![controller.clone()]);
        let own = cg.dir.strip_prefix(&root).unwrap().join(V2_LEAF);
        assert_eq!(
            v2_cgroup_of(cordon),
            format!("/{}", own.display()),
            "cordon's process is in the leaf"
        );
        assert!(v2_list(&cg.dir, "cgroup.procs").is_empty());
        assert!(v2_list(&cg.dir, "cgroup.subtree_control").contains(&controller));
        let session = cg.dir.join("cordon-b_test");
        std::fs::create_dir(&session).unwrap();
        assert!(
            v2_list(&session, "cgroup.controllers").contains(&controller),
            "a session's cgroup gets the controller"
        );
        // And the parent of a process in the leaf is where sessions go.
        assert_eq!(v2_parent(&root, &v2_cgroup_of(cordon)), cg.dir);

        // Asked again (another engine in the same process): nothing changes.
        assert_eq!(
            delegate_v2(&cg.dir, &[cordon], &wanted).unwrap(),
            vec![controller]
        );
        assert_eq!(v2_cgroup_of(cordon), format!("/{}", own.display()));
    }

    fn limits() -> Limits {
        Limits {
            memory_bytes: 256 << 20,
            pids: 64,
            open_files: 1024,
            tmpfs_bytes: 64 << 20,
            cpu_weight: 100,
        }
    }

    #[test]
    fn breaches_are_read_from_the_kernels_counters() {
        let dir = tempfile::tempdir().unwrap();
        let sb = SandboxLimits {
            version: Version::V1,
            dirs: vec![dir.path().to_path_buf()],
            procs: vec![],
            limits: std::sync::Mutex::new(limits()),
        };
        assert_eq!(sb.breach(), None);
        std::fs::write(dir.path().join("pids.events"), "max 0\n").unwrap();
        std::fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 0\n",
        )
        .unwrap();
        assert_eq!(sb.breach(), None);
        std::fs::write(dir.path().join("pids.events"), "max 3\n").unwrap();
        assert_eq!(sb.breach(), Some(Breach::Pids));
        std::fs::write(
            dir.path().join("memory.oom_control"),
            "oom_kill_disable 0\nunder_oom 0\noom_kill 1\n",
        )
        .unwrap();
        assert_eq!(sb.breach(), Some(Breach::Memory));
        std::mem::forget(sb);
    }

    #[test]
    fn a_host_without_writable_cgroups_says_so() {
        let dir = tempfile::tempdir().unwrap();
        let e = Enforcer::detect(limits(), &dir.path().join("no-cgroups"));
        let s = e.status();
        assert_eq!(
            (s.cgroups, s.memory, s.pids),
            ("none", false, false),
            "{s:?}"
        );
        assert!(s.reason.is_some());
        let sb = e.create("b_test").unwrap();
        assert_eq!(sb.breach(), None);
    }

    #[test]
    fn the_browser_starts_through_a_shell_that_joins_its_cgroups_first() {
        let sb = SandboxLimits {
            version: Version::V1,
            dirs: vec![],
            procs: vec![
                PathBuf::from("/sys/fs/cgroup/memory/x/cordon-b_1/cgroup.procs"),
                PathBuf::from("/tmp/it's/cgroup.procs"),
            ],
            limits: std::sync::Mutex::new(limits()),
        };
        let cmd = sb.command(Path::new("/usr/bin/bwrap"));
        assert_eq!(cmd.get_program(), "/bin/sh");
        let args: Vec<String> = cmd
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(args[0], "-c");
        assert!(
            args[1].starts_with(
                "set -e; echo 0 > '/sys/fs/cgroup/memory/x/cordon-b_1/cgroup.procs'; "
            ),
            "{}",
            args[1]
        );
        assert!(
            args[1].contains(r"'/tmp/it'\''s/cgroup.procs'"),
            "{}",
            args[1]
        );
        assert!(
            args[1].ends_with("ulimit -n 1024; exec \"$0\" \"$@\""),
            "{}",
            args[1]
        );
        assert_eq!(args[2], "/usr/bin/bwrap");
        std::mem::forget(sb);
    }

    #[test]
    fn a_remote_sandbox_gets_the_numbers_and_no_cgroup_here() {
        let e = Enforcer::detect(limits(), Path::new("/nonexistent-cgroup-root"));
        let remote = e.remote();
        assert_eq!(remote.limits(), limits());
        assert!(remote.dirs.is_empty() && remote.procs.is_empty());
        assert_eq!(remote.breach(), None);
    }

    #[test]
    fn the_breach_message_names_the_limit() {
        assert!(Breach::Memory.describe(&limits()).contains("256 MiB"));
        assert!(Breach::Pids.describe(&limits()).contains("(64)"));
    }
}
