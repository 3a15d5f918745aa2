//! A throwaway `redis-server` for tests, demos and the lab: loopback only, on a free
//! port, no persistence, stopped when dropped.

use std::io;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `redis-server` child process listening on `127.0.0.1`.
///
/// ```no_run
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let server = portero_redis::LocalRedis::start()?; // needs redis-server on PATH
/// let url = server.url(); // redis://127.0.0.1:PORT
/// # let _ = url; Ok(()) }
/// ```
#[derive(Debug)]
pub struct LocalRedis {
    child: Child,
    port: u16,
}

impl LocalRedis {
    /// Starts `redis-server` on a free loopback port and waits (up to 10 s) until it
    /// accepts connections. Fails if `redis-server` is not installed or does not
    /// come up.
    pub fn start() -> io::Result<Self> {
        // The OS picks a free port; it is handed straight to redis-server.
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        Self::start_with(port, &[], None)
    }

    fn start_with(port: u16, extra: &[&str], dir: Option<&Path>) -> io::Result<Self> {
        let mut command = Command::new("redis-server");
        if let Some(dir) = dir {
            command.current_dir(dir);
        }
        let child = command
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .args(extra)
            .stdout(Stdio::null())
            .spawn()
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("cannot start redis-server ({e}); install it (Debian: apt-get install redis-server, or `cargo xtask setup`)"),
                )
            })?;
        let mut server = Self { child, port };
        let deadline = Instant::now() + Duration::from_secs(10);
        while TcpStream::connect(("127.0.0.1", port)).is_err() {
            if let Some(status) = server.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited at start ({status}) on port {port}"
                )));
            }
            if Instant::now() > deadline {
                server.stop();
                return Err(io::Error::other(format!(
                    "redis-server did not accept connections on port {port} within 10 s"
                )));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// Stops the server now (an outage, for tests); dropping it does the same.
    pub fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for LocalRedis {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A throwaway Redis Cluster of three primaries on loopback ports (each node in its own
/// temporary directory, removed when dropped), for tests and the lab.
#[derive(Debug)]
pub struct LocalCluster {
    nodes: Vec<LocalRedis>,
    dir: PathBuf,
}

impl LocalCluster {
    /// Starts three `redis-server --cluster-enabled yes` nodes, joins them with
    /// `redis-cli --cluster create` (no replicas) and waits (up to 20 s) until every
    /// node reports `cluster_state:ok`.
    pub fn start() -> io::Result<Self> {
        let dir = std::env::temp_dir().join(format!(
            "portero-cluster-{}-{}",
            std::process::id(),
            free_port()?
        ));
        std::fs::create_dir_all(&dir)?;
        let mut cluster = Self {
            nodes: Vec::new(),
            dir,
        };
        for _ in 0..3 {
            let port = cluster_port()?;
            let node_dir = cluster.dir.join(port.to_string());
            std::fs::create_dir_all(&node_dir)?;
            let args = [
                "--cluster-enabled",
                "yes",
                "--cluster-config-file",
                "nodes.conf",
            ];
            cluster
                .nodes
                .push(LocalRedis::start_with(port, &args, Some(&node_dir))?);
        }
        let addresses: Vec<String> = cluster
            .nodes
            .iter()
            .map(|n| format!("127.0.0.1:{}", n.port))
            .collect();
        let created = Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addresses)
            .args(["--cluster-replicas", "0", "--cluster-yes"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()?;
        if !created.success() {
            return Err(io::Error::other(format!(
                "redis-cli --cluster create failed ({created})"
            )));
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while !cluster.nodes.iter().all(|n| cluster_ok(n.port)) {
            if Instant::now() > deadline {
                return Err(io::Error::other(
                    "the cluster did not reach cluster_state:ok within 20 s",
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(cluster)
    }

    /// `redis://127.0.0.1:PORT` of every node.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(LocalRedis::url).collect()
    }
}

impl Drop for LocalCluster {
    fn drop(&mut self) {
        for node in &mut self.nodes {
            node.stop();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// A free port whose cluster bus port (port + 10000) is free too.
fn cluster_port() -> io::Result<u16> {
    for _ in 0..100 {
        let port = free_port()?;
        if port <= 55_535 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return Ok(port);
        }
    }
    Err(io::Error::other("no free port pair for a cluster node"))
}

fn cluster_ok(port: u16) -> bool {
    Command::new("redis-cli")
        .args(["-p", &port.to_string(), "cluster", "info"])
        .output()
        .is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("cluster_state:ok"))
}
