//! Which classifiers a build knows by name: the built-ins, plus any a program adds.

use crate::{check_dependencies, Classifier, DependencyError};

/// Makes a fresh classifier.
pub type MakeClassifier = fn() -> Box<dyn Classifier>;

/// Classifiers by name. `--classifiers` and the config file choose from it; a program that
/// wraps the indexer adds its own with [`Registry::with`] without editing this crate.
#[derive(Debug, Clone)]
pub struct Registry {
    entries: Vec<(&'static str, MakeClassifier)>,
}

/// What went wrong choosing classifiers by name.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    /// No classifier has this name.
    #[error("unknown classifier {name:?}; known classifiers are: {known}")]
    Unknown {
        /// The name asked for.
        name: String,
        /// The names there are, comma-separated.
        known: String,
    },
    /// The chosen order does not satisfy the dependencies.
    #[error(transparent)]
    Dependency(#[from] DependencyError),
}

impl Registry {
    /// The built-in classifiers (`BUILTIN_NAMES`).
    pub fn builtin() -> Self {
        use crate::{
            Erc1155Classifier, Erc1167Classifier, Erc165Classifier, Erc20Classifier, Erc4626Classifier,
            Erc721Classifier,
        };
        let entries: Vec<(&'static str, MakeClassifier)> = vec![
            (Erc20Classifier::NAME, || Box::new(Erc20Classifier)),
            (Erc165Classifier::NAME, || Box::new(Erc165Classifier)),
            (Erc721Classifier::NAME, || Box::new(Erc721Classifier)),
            (Erc1155Classifier::NAME, || Box::new(Erc1155Classifier)),
            (Erc1167Classifier::NAME, || Box::new(Erc1167Classifier)),
            (Erc4626Classifier::NAME, || Box::new(Erc4626Classifier)),
        ];
        Self { entries }
    }

    /// Adds (or replaces) the classifier called `name`.
    #[must_use]
    pub fn with(mut self, name: &'static str, make: MakeClassifier) -> Self {
        self.entries.retain(|(n, _)| *n != name);
        self.entries.push((name, make));
        self
    }

    /// Every name, in the order added.
    pub fn names(&self) -> Vec<&'static str> {
        self.entries.iter().map(|(n, _)| *n).collect()
    }

    /// A new classifier called `name`.
    pub fn make(&self, name: &str) -> Option<Box<dyn Classifier>> {
        self.entries.iter().find(|(n, _)| *n == name).map(|(_, make)| make())
    }

    /// The classifiers called `names`, in that order, checked for dependencies.
    pub fn resolve<S: AsRef<str>>(&self, names: &[S]) -> Result<Vec<Box<dyn Classifier>>, RegistryError> {
        let chosen = names
            .iter()
            .map(|name| {
                self.make(name.as_ref()).ok_or_else(|| RegistryError::Unknown {
                    name: name.as_ref().to_owned(),
                    known: self.names().join(", "),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        check_dependencies(&chosen)?;
        Ok(chosen)
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::builtin()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builtins_resolve_and_names_are_checked() {
        let registry = Registry::builtin();
        assert_eq!(registry.names(), crate::BUILTIN_NAMES);
        let all = registry.resolve(crate::BUILTIN_NAMES).expect("built-ins");
        assert_eq!(all.iter().map(|c| c.name()).collect::<Vec<_>>(), crate::BUILTIN_NAMES);
        assert!(matches!(registry.resolve(&["erc20", "nope"]), Err(RegistryError::Unknown { .. })));
        assert!(matches!(registry.resolve(&["erc721"]), Err(RegistryError::Dependency(_))));
        let extended = registry.with("another", || Box::new(crate::Erc165Classifier));
        assert_eq!(extended.resolve(&["another"]).expect("added").len(), 1);
    }
}
