// Re-embed the migrations when they change.
fn main() {
    println!("cargo:rerun-if-changed=../migrations");
}
