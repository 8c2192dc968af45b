//! The module map docs/architecture.md draws is the one the code has: each top-level module
//! imports only modules listed above it in the map's "Modules" section, and no files of one
//! folder import each other in a circle.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::{Path, PathBuf},
};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `.rs` file under `dir`.
fn sources(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src") {
        let path = entry.expect("entry").path();
        if path.is_dir() {
            sources(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments (a doc comment may name any module).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("read source");
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The names right after each `prefix` (`crate::`, `super::`): `prefix name` or each top-level
/// name of `prefix {a, b::c, d::{e}}`.
fn names_after(code: &str, prefix: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let ident = |s: &str| s.chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect::<String>();
    for (at, _) in code.match_indices(prefix) {
        let before = code[..at].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let rest = &code[at + prefix.len()..];
        if let Some(group) = rest.strip_prefix('{') {
            // Each top-level item of the group, split by commas.
            let mut depth = 0usize;
            let mut item = String::new();
            for c in group.chars() {
                match c {
                    '{' => {
                        depth += 1;
                        item.push(c);
                    }
                    '}' if depth == 0 => break,
                    '}' => {
                        depth -= 1;
                        item.push(c);
                    }
                    ',' if depth == 0 => {
                        out.insert(ident(item.trim()));
                        item.clear();
                    }
                    _ => item.push(c),
                }
            }
            out.insert(ident(item.trim()));
        } else {
            out.insert(ident(rest));
        }
    }
    out.remove("");
    out.remove("self");
    out
}

/// The top-level modules in the order docs/architecture.md's "Modules" section lists them.
fn documented_order() -> Vec<String> {
    let doc = std::fs::read_to_string(root().join("docs/architecture.md")).expect("architecture.md");
    let section = doc.split("\n## Modules").nth(1).expect("a Modules section");
    let section = section.split("\n## ").next().unwrap_or(section);
    let mut order = Vec::new();
    for line in section.lines().filter(|l| l.starts_with("* `")) {
        let head = line.split(" — ").next().unwrap_or(line);
        for name in head.split('`').skip(1).step_by(2) {
            let top = name.trim_end_matches('/').trim_end_matches(".rs");
            if !top.contains('/') && !order.iter().any(|o| o == top) {
                order.push(top.to_string());
            }
        }
    }
    order
}

#[test]
fn each_module_imports_only_the_modules_listed_above_it() {
    let order = documented_order();
    let src = root().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    let mut wrong = Vec::new();
    let mut tops = BTreeSet::new();
    for file in &files {
        let relative = file.strip_prefix(&src).expect("under src");
        let top = relative.components().next().expect("a component").as_os_str().to_string_lossy();
        let top = top.trim_end_matches(".rs").to_string();
        if matches!(top.as_str(), "lib" | "main") {
            continue;
        }
        tops.insert(top.clone());
        let Some(rank) = order.iter().position(|o| *o == top) else {
            wrong.push(format!("{top} is not in docs/architecture.md's module list"));
            continue;
        };
        for used in names_after(&code(file), "crate::") {
            if used == top {
                continue;
            }
            match order.iter().position(|o| *o == used) {
                Some(at) if at < rank => {}
                Some(_) => wrong.push(format!("{} imports {used}, listed below {top}", relative.display())),
                None => wrong.push(format!("{} imports {used}, which the list lacks", relative.display())),
            }
        }
    }
    for listed in &order {
        assert!(tops.contains(listed) || listed == "main", "the list names {listed}, which src/ lacks");
    }
    assert!(wrong.is_empty(), "{wrong:#?}");
}

#[test]
fn no_files_of_a_folder_import_each_other_in_a_circle() {
    let src = root().join("src");
    let mut files = Vec::new();
    sources(&src, &mut files);
    // Folder → file stem → the sibling stems it imports through `super::`.
    let mut folders: BTreeMap<PathBuf, BTreeMap<String, BTreeSet<String>>> = BTreeMap::new();
    for file in &files {
        let mut stem = file.file_stem().expect("a name").to_string_lossy().to_string();
        let mut folder = file.parent().expect("a folder").to_path_buf();
        if matches!(stem.as_str(), "lib" | "main") {
            continue;
        }
        // A folder's `mod.rs` is that folder's file among its parent's: its `super::` is theirs.
        if stem == "mod" {
            stem = folder.file_name().expect("a folder name").to_string_lossy().to_string();
            folder = folder.parent().expect("a parent").to_path_buf();
        }
        folders
            .entry(folder)
            .or_default()
            .entry(stem)
            .or_default()
            .extend(names_after(&code(file), "super::"));
    }
    let mut circles = Vec::new();
    for (folder, imports) in &folders {
        let siblings: BTreeSet<&String> = imports.keys().collect();
        // Keep the edges to sibling files only, then look for a path back to each start.
        let edges: BTreeMap<&String, Vec<&String>> = imports
            .iter()
            .map(|(file, used)| (file, used.iter().filter(|u| siblings.contains(u) && *u != file).collect()))
            .collect();
        for start in edges.keys() {
            let mut seen = BTreeSet::new();
            let mut stack: Vec<&String> = edges[start].clone();
            while let Some(next) = stack.pop() {
                if next == *start {
                    circles
                        .push(format!("{}: {start} imports itself through its siblings", folder.display()));
                    break;
                }
                if seen.insert(next) {
                    stack.extend(edges.get(next).into_iter().flatten());
                }
            }
        }
    }
    assert!(circles.is_empty(), "{circles:#?}");
}

#[test]
fn the_import_reader_finds_grouped_and_single_names() {
    let code = "use crate::{db::{a, b}, index::Stage, txid};\nlet x = crate::status::read();\nuse super::{run::{A}, sorter};";
    assert_eq!(
        names_after(code, "crate::").into_iter().collect::<Vec<_>>(),
        ["db", "index", "status", "txid"]
    );
    assert_eq!(names_after(code, "super::").into_iter().collect::<Vec<_>>(), ["run", "sorter"]);
}
