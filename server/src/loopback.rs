//! Who is on the other end of a loopback TCP connection.
//!
//! The control plane's own loopback listeners (the host side of a bwrap
//! sandbox's DevTools socket, and the egress listener its forwarder feeds)
//! are reachable by every process on the host. A connection is only taken
//! when its client socket is one of this process's own file descriptors:
//! among `/proc/self/fd`, a socket whose own address is the connection's
//! peer and whose peer is the listener. Another local user or process, even
//! one that finds the port, gets the connection closed.
//!
//! Each descriptor is asked directly (`getsockname`, `getpeername`). The
//! kernel's `/proc/self/net/tcp`, read here before, walks the whole TCP
//! hash table to print it, about 4 ms of CPU a read on a 24 GiB host
//! whatever few sockets there are, and every new connection to these
//! listeners paid it (BENCHMARKS.md, 13:40).

use std::net::SocketAddr;
use std::os::fd::RawFd;

/// Whether the TCP connection from `peer` to `local` was opened by this
/// process. `false` when it cannot be told (not Linux, `/proc` unreadable).
pub fn opened_by_this_process(local: SocketAddr, peer: SocketAddr) -> bool {
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    fds.flatten()
        .filter_map(|fd| fd.file_name().to_str()?.parse::<RawFd>().ok())
        .any(|fd| connects(fd, peer, local))
}

/// Whether descriptor `fd` of this process is a socket from `client` to
/// `server`. A descriptor that is not a socket, or was closed meanwhile,
/// is not.
fn connects(fd: RawFd, client: SocketAddr, server: SocketAddr) -> bool {
    use nix::sys::socket::{SockaddrStorage, getpeername, getsockname};
    let addr = |s: SockaddrStorage| -> Option<SocketAddr> {
        if let Some(v4) = s.as_sockaddr_in() {
            return Some(SocketAddr::V4((*v4).into()));
        }
        s.as_sockaddr_in6().map(|v6| SocketAddr::V6((*v6).into()))
    };
    getsockname::<SockaddrStorage>(fd).ok().and_then(addr) == Some(client)
        && getpeername::<SockaddrStorage>(fd).ok().and_then(addr) == Some(server)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};

    #[test]
    fn a_socket_of_this_process_to_another_server_is_not_taken_for_it() {
        let one = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let other = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let _client = TcpStream::connect(other.local_addr().unwrap()).unwrap();
        let (_server, peer) = other.accept().unwrap();
        assert!(opened_by_this_process(other.local_addr().unwrap(), peer));
        assert!(!opened_by_this_process(one.local_addr().unwrap(), peer));
        // A port no socket of this process uses.
        let mut nobody = peer;
        nobody.set_port(peer.port().wrapping_add(1).max(1));
        assert!(!opened_by_this_process(other.local_addr().unwrap(), nobody));
    }

    #[test]
    fn a_connection_from_this_process_is_recognised() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let local = listener.local_addr().unwrap();
        let _client = TcpStream::connect(local).unwrap();
        let (_server, peer) = listener.accept().unwrap();
        assert!(opened_by_this_process(local, peer));
    }

    #[test]
    fn a_connection_from_another_process_is_not() {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let local = listener.local_addr().unwrap();
        // bash's /dev/tcp opens the connection in the child process.
        let mut child = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!(
                "exec 3<>/dev/tcp/127.0.0.1/{}; echo connected; read -t 10 _ <&3",
                local.port()
            ))
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let (server, peer) = listener.accept().unwrap();
        let mut line = [0u8; 10];
        child
            .stdout
            .as_mut()
            .unwrap()
            .read_exact(&mut line)
            .unwrap();
        assert!(!opened_by_this_process(local, peer));
        drop(server);
        let _ = child.kill();
        let _ = child.wait();
    }
}
