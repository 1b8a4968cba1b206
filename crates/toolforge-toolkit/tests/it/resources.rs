//! Resource handles: lifecycle, the handle bound, and traversal attempts on a real directory.

use toolforge_toolkit::resources::{ResourceError, Resources};

#[test]
fn traversal_is_impossible_and_handles_are_bounded() {
    let outer = tempfile::tempdir().unwrap();
    std::fs::write(outer.path().join("secret.txt"), "top secret").unwrap();
    let dir = outer.path().join("res");
    std::fs::create_dir(&dir).unwrap();
    std::fs::write(dir.join("notes.txt"), "hello").unwrap();
    std::fs::write(dir.join(".hidden"), "no").unwrap();
    std::fs::create_dir(dir.join("sub")).unwrap();
    std::fs::write(dir.join("sub/inner.txt"), "no").unwrap();
    #[cfg(unix)]
    std::os::unix::fs::symlink(outer.path().join("secret.txt"), dir.join("link.txt")).unwrap();
    let r = Resources::new(Some(dir.clone()), 3);
    let names: Vec<String> = r.list().unwrap().into_iter().map(|i| i.name).collect();
    assert_eq!(names, ["notes.txt"]);
    for bad in [
        "../secret.txt",
        "..",
        "/etc/passwd",
        "sub/inner.txt",
        ".hidden",
        "link.txt",
        "notes.txt/",
        "notes.txt\0",
        "",
        "%2e%2e/secret.txt",
    ] {
        assert!(
            matches!(r.open(bad), Err(ResourceError::NotFound(_))),
            "{bad:?}"
        );
    }
    let hs: Vec<String> = (0..3).map(|_| r.open("notes.txt").unwrap()).collect();
    assert!(matches!(
        r.open("notes.txt"),
        Err(ResourceError::TooManyHandles(3))
    ));
    assert_eq!(r.read(&hs[0]).unwrap().1, "hello");
    r.release(&hs[0]).unwrap();
    assert!(matches!(r.read(&hs[0]), Err(ResourceError::BadHandle(_))));
    assert!(matches!(
        r.release(&hs[0]),
        Err(ResourceError::BadHandle(_))
    ));
    assert!(r.open("notes.txt").is_ok(), "a released slot is reusable");
}

#[test]
fn bundled_files_are_listed_with_uris() {
    let r = Resources::new(None, 8);
    let list = r.list().unwrap();
    assert!(list.len() >= 3);
    assert!(
        list.iter()
            .all(|i| i.uri == format!("resource://mcp-agent-toolkit/{}", i.name))
    );
}
