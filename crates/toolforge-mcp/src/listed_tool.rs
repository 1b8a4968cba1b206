//! One tool as its server listed it, held small: the definition less its `inputSchema`, shared,
//! and the schema as compact JSON text ([`InputSchema`]), shared with the catalog.
//!
//! rmcp's `Tool` holds its schema parsed, which with 10,000 tools was the largest thing the
//! gateway kept (16 MB of serde_json maps for 1 MB of text; `benchmarks/proxy/README.md`).
//! The whole definition is put back together, schema parsed, only where an rmcp `Tool` is
//! needed: building a `tools/list` answer (then cached) or one tool's definition.

use std::sync::{Arc, LazyLock};

use rmcp::model::{JsonObject, Tool as McpTool, ToolAnnotations};
use toolforge_select::InputSchema;
use toolforge_select::compact_json::shrink_object;

/// The schema a held definition carries in rmcp's field: one empty map for all of them.
static NO_SCHEMA: LazyLock<Arc<JsonObject>> = LazyLock::new(Arc::default);

/// A listed tool: cloning it clones two `Arc`s.
#[derive(Clone, Debug)]
pub struct ListedTool {
    /// The definition with `input_schema` set to [`NO_SCHEMA`]: never handed out as it is.
    rest: Arc<McpTool>,
    schema: InputSchema,
}

impl ListedTool {
    /// Keeps `tool`, its schema as text.
    #[must_use]
    pub fn new(mut tool: McpTool) -> Self {
        let schema = InputSchema::from_object(&tool.input_schema);
        tool.input_schema = NO_SCHEMA.clone();
        // Kept as long as the list: at its size, not as the parser grew it.
        if let Some(meta) = &mut tool.meta {
            shrink_object(&mut meta.0);
        }
        if let Some(output) = &mut tool.output_schema {
            shrink_object(Arc::make_mut(output));
        }
        Self {
            rest: Arc::new(tool),
            schema,
        }
    }

    #[must_use]
    pub fn name(&self) -> &str {
        &self.rest.name
    }

    #[must_use]
    pub fn schema(&self) -> &InputSchema {
        &self.schema
    }

    #[must_use]
    pub fn annotations(&self) -> Option<&ToolAnnotations> {
        self.rest.annotations.as_ref()
    }

    /// The definition less its schema, for readers of the other fields (its `input_schema`
    /// is empty: [`ListedTool::schema`] holds it).
    #[must_use]
    pub fn without_schema(&self) -> &McpTool {
        &self.rest
    }

    /// The whole definition as the server gave it, its schema parsed.
    #[must_use]
    pub fn definition(&self) -> McpTool {
        let mut tool = McpTool::clone(&self.rest);
        tool.input_schema = Arc::new(self.schema.to_object());
        tool
    }

    /// A tool from its definition less the schema (whatever its `input_schema` holds) and its
    /// schema.
    #[must_use]
    pub fn from_parts(mut rest: McpTool, schema: InputSchema) -> Self {
        rest.input_schema = NO_SCHEMA.clone();
        Self {
            rest: Arc::new(rest),
            schema,
        }
    }

    /// Appends the definition as rmcp writes it (the same bytes as
    /// `serde_json::to_writer(out, &self.definition())`), its schema copied from its text.
    pub fn write_json(&self, out: &mut Vec<u8>) -> serde_json::Result<()> {
        // rmcp writes `inputSchema` after `name`, `title` and `description`, all strings, in
        // which every quote is escaped: the first `"inputSchema":{}` is the field itself.
        const EMPTY: &[u8] = br#""inputSchema":{}"#;
        let start = out.len();
        serde_json::to_writer(&mut *out, &*self.rest)?;
        let Some(at) = out[start..]
            .windows(EMPTY.len())
            .position(|w| w == EMPTY)
            .map(|i| start + i + EMPTY.len() - 2)
        else {
            // Not reached with rmcp's `Tool`; written whole, parsed, rather than wrong.
            out.truncate(start);
            return serde_json::to_writer(out, &self.definition());
        };
        out.splice(at..at + 2, self.schema.as_json().bytes());
        Ok(())
    }

    /// The tool's `_meta`, when it has one.
    #[must_use]
    pub fn meta(&self) -> Option<&JsonObject> {
        self.rest.meta.as_ref().map(|m| &m.0)
    }

    /// The same tool with `meta` as its `_meta` (the schema still shared).
    #[must_use]
    pub fn with_meta(&self, meta: JsonObject) -> Self {
        let mut rest = self.rest.clone();
        Arc::make_mut(&mut rest).meta = Some(rmcp::model::MetaObject(meta));
        Self {
            rest,
            schema: self.schema.clone(),
        }
    }

    /// The same tool under `name` (the schema still shared).
    #[must_use]
    pub fn renamed(&self, name: &str) -> Self {
        let mut rest = self.rest.clone();
        Arc::make_mut(&mut rest).name = name.to_owned().into();
        Self {
            rest,
            schema: self.schema.clone(),
        }
    }
}

impl From<McpTool> for ListedTool {
    fn from(tool: McpTool) -> Self {
        Self::new(tool)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_description_that_spells_the_schema_field_does_not_fool_the_writer() {
        let sent = json!({
            "name": "x\"inputSchema\":{}",
            "title": "\"inputSchema\":{}",
            "description": "\"inputSchema\":{} and \"inputSchema\":{}",
            "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}
        });
        let tool: McpTool = serde_json::from_value(sent).unwrap();
        let mut written = Vec::new();
        ListedTool::new(tool.clone())
            .write_json(&mut written)
            .unwrap();
        assert_eq!(
            String::from_utf8(written).unwrap(),
            serde_json::to_string(&tool).unwrap()
        );
    }

    #[test]
    fn the_definition_comes_back_whole_and_written_as_rmcp_writes_it() {
        let sent = json!({
            "name": "read_file",
            "title": "Read a file",
            "description": "Reads a file.",
            "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}}},
            "outputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true},
            "_meta": {"tags": ["files"]}
        });
        let tool: McpTool = serde_json::from_value(sent.clone()).unwrap();
        let listed = ListedTool::new(tool.clone());
        assert_eq!(
            listed.schema().as_json(),
            r#"{"type":"object","properties":{"path":{"type":"string"}}}"#
        );
        assert!(listed.without_schema().input_schema.is_empty());
        assert_eq!(
            serde_json::to_string(&listed.definition()).unwrap(),
            serde_json::to_string(&tool).unwrap()
        );
        let mut written = Vec::new();
        listed.write_json(&mut written).unwrap();
        assert_eq!(written, serde_json::to_vec(&tool).unwrap());
        let renamed = listed.renamed("fs_read_file");
        assert_eq!(renamed.name(), "fs_read_file");
        assert_eq!(listed.name(), "read_file", "the original is untouched");
        assert!(InputSchema::ptr_eq(renamed.schema(), listed.schema()));
    }
}
