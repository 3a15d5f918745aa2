//! A throwaway `redis-server` for tests, demos and the lab: loopback only, on a free
//! port, no persistence, stopped when dropped.

use std::io::{self, Read, Write};
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

    /// Starts `redis-server` on loopback `port` (a test that needs Redis to appear
    /// where a client already looks); fails if the port is taken by anything else.
    pub fn start_on(port: u16) -> io::Result<Self> {
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
        loop {
            // The child first: a listener on the port may be another process's server
            // (a port race), which must never pass for ours.
            if let Some(status) = server.child.try_wait()? {
                return Err(io::Error::other(format!(
                    "redis-server exited at start ({status}) on port {port}"
                )));
            }
            match process_id_on(port) {
                Some(pid) if pid == server.child.id() => break,
                Some(pid) => {
                    server.stop();
                    return Err(io::Error::other(format!(
                        "port {port} is answered by another redis-server (process {pid})"
                    )));
                }
                None => {}
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

    /// The server's process id (the child this value started and owns).
    pub fn process_id(&self) -> u32 {
        self.child.id()
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

    /// Stops node `i` now (a primary that dies, for tests); nothing if there is none.
    pub fn stop_node(&mut self, i: usize) {
        if let Some(node) = self.nodes.get_mut(i) {
            node.stop();
        }
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

/// The `process_id` a Redis server on loopback `port` reports (`INFO server`), or
/// `None` if nothing there answers like one yet.
fn process_id_on(port: u16) -> Option<u32> {
    let mut stream = TcpStream::connect(("127.0.0.1", port)).ok()?;
    stream.set_read_timeout(Some(Duration::from_secs(1))).ok()?;
    stream
        .write_all(b"*2\r\n$4\r\nINFO\r\n$6\r\nserver\r\n")
        .ok()?;
    let mut reply = Vec::new();
    let mut chunk = [0u8; 4096];
    while !reply.windows(11).any(|w| w == b"process_id:") || !reply.ends_with(b"\r\n") {
        let n = stream.read(&mut chunk).ok()?;
        if n == 0 || reply.len() > 64 * 1024 {
            return None;
        }
        reply.extend_from_slice(&chunk[..n]);
    }
    let text = String::from_utf8_lossy(&reply);
    let line = text.lines().find_map(|l| l.strip_prefix("process_id:"))?;
    line.trim().parse().ok()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A second server asked to start on a port another server already answers:
    /// its own process cannot bind and exits, and the listener that answers is not
    /// its child, so it fails instead of attaching to the other server.
    #[test]
    fn a_server_started_on_a_taken_port_never_attaches_to_the_other() {
        let first = LocalRedis::start().expect("redis-server for this test");
        assert_eq!(process_id_on(first.port), Some(first.process_id()));
        let second = LocalRedis::start_with(first.port, &[], None);
        assert!(second.is_err(), "attached to another process's server");
    }
}
