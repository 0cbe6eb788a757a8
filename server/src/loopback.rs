//! Who is on the other end of a loopback TCP connection.
//!
//! The control plane's own loopback listeners (the host side of a bwrap
//! sandbox's DevTools socket, and the egress listener its forwarder feeds)
//! are reachable by every process on the host. A connection is only taken
//! when its client socket is one of this process's own file descriptors:
//! the client end's inode is found in `/proc/self/net/tcp` (or `tcp6`) and
//! looked for among `/proc/self/fd`. Another local user or process, even
//! one that finds the port, gets the connection closed.

use std::net::{IpAddr, SocketAddr};

/// Whether the TCP connection from `peer` to `local` was opened by this
/// process. `false` when it cannot be told (not Linux, `/proc` unreadable).
pub fn opened_by_this_process(local: SocketAddr, peer: SocketAddr) -> bool {
    let table = match peer.ip() {
        IpAddr::V4(_) => "/proc/self/net/tcp",
        IpAddr::V6(_) => "/proc/self/net/tcp6",
    };
    let Ok(text) = std::fs::read_to_string(table) else {
        return false;
    };
    let Some(inode) = client_inode(&text, peer, local) else {
        return false;
    };
    let want = format!("socket:[{inode}]");
    let Ok(fds) = std::fs::read_dir("/proc/self/fd") else {
        return false;
    };
    fds.flatten().any(|fd| {
        std::fs::read_link(fd.path()).is_ok_and(|target| target.as_os_str() == want.as_str())
    })
}

/// The inode of the socket whose local address is `client` and remote
/// address is `server`, from the text of `/proc/net/tcp[6]`.
fn client_inode(table: &str, client: SocketAddr, server: SocketAddr) -> Option<u64> {
    let (want_local, want_remote) = (hex_addr(client), hex_addr(server));
    // The first line is the column header. Each line is split only as far
    // as it must be: the table holds every TCP socket of the network
    // namespace, and this runs for each connection a sandbox's relay takes
    // (BENCHMARKS.md, "instructions per call": collecting every line's
    // columns was half of an open's instructions).
    table.lines().skip(1).find_map(|line| {
        // sl local rem st tx:rx tr:when retrnsmt uid timeout inode …
        let mut cols = line.split_ascii_whitespace();
        let (_sl, local, remote) = (cols.next()?, cols.next()?, cols.next()?);
        if local != want_local || remote != want_remote {
            return None;
        }
        cols.nth(6)?.parse().ok().filter(|&i| i != 0)
    })
}

/// An address as the kernel prints it in `/proc/net/tcp[6]`: each 32-bit
/// word of the address in host byte order as hex, then the port in hex.
fn hex_addr(addr: SocketAddr) -> String {
    let ip = match addr.ip() {
        IpAddr::V4(v4) => format!("{:08X}", u32::from_ne_bytes(v4.octets())),
        IpAddr::V6(v6) => v6
            .octets()
            .chunks(4)
            .map(|w| format!("{:08X}", u32::from_ne_bytes([w[0], w[1], w[2], w[3]])))
            .collect(),
    };
    format!("{ip}:{:04X}", addr.port())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::{Ipv4Addr, TcpListener, TcpStream};

    #[test]
    fn the_kernels_address_format_is_matched() {
        let table = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n\
   0: 0100007F:1F90 00000000:0000 0A 00000000:00000000 00:00000000 00000000     0        0 1111 1 0000000000000000 100 0 0 10 0\n\
   1: 0100007F:C350 0100007F:1F90 01 00000000:00000000 00:00000000 00000000     0        0 2222 1 0000000000000000 20 4 30 10 -1\n";
        if cfg!(target_endian = "little") {
            assert_eq!(
                client_inode(
                    table,
                    "127.0.0.1:50000".parse().unwrap(),
                    "127.0.0.1:8080".parse().unwrap()
                ),
                Some(2222)
            );
        }
        assert_eq!(
            client_inode(
                table,
                "127.0.0.1:50001".parse().unwrap(),
                "127.0.0.1:8080".parse().unwrap()
            ),
            None
        );
    }

    #[test]
    fn a_short_or_inode_less_line_names_no_socket() {
        let (client, server) = (
            "127.0.0.1:50000".parse().unwrap(),
            "127.0.0.1:8080".parse().unwrap(),
        );
        let header = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n";
        let (l, r) = (hex_addr(client), hex_addr(server));
        for line in [
            // Cut short before the inode.
            format!("   1: {l} {r} 01 00000000:00000000 00:00000000 00000000     0        0"),
            // Inode 0: a socket being torn down.
            format!("   1: {l} {r} 06 00000000:00000000 00:00000000 00000000     0        0 0 1"),
            // The right client, another server.
            format!(
                "   1: {l} 0100007F:0051 01 00000000:00000000 00:00000000 00000000     0        0 3333 1"
            ),
            // Not a number where the inode is.
            format!("   1: {l} {r} 01 00000000:00000000 00:00000000 00000000     0        0 x 1"),
        ] {
            assert_eq!(
                client_inode(&format!("{header}{line}\n"), client, server),
                None,
                "{line}"
            );
        }
        let good = format!(
            "   2: {l} {r} 01 00000000:00000000 00:00000000 00000000     0        0 4444 1\n"
        );
        assert_eq!(
            client_inode(&format!("{header}{good}"), client, server),
            Some(4444)
        );
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
