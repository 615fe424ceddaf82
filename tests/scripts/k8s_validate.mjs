// Validates Kubernetes manifests against the Kubernetes API's schemas, from the npm package
// kubernetes-models (generated from the Kubernetes OpenAPI spec), in two passes:
//   1. each object's validate(): the JSON schema of its kind (types, formats, enums, required
//      fields), as the API server's validation of field types does;
//   2. unknown fields, which the schemas allow but the API server rejects under strict field
//      validation (kubectl's default since 1.27): every object is type-checked by TypeScript
//      against the package's interface for its kind as an object literal, so a misspelt or
//      misplaced key (readinesProbe, a probe on the pod) is an error.
// Usage: node k8s_validate.mjs WORK_DIR FILE.yaml...   (WORK_DIR holds node_modules)
// Prints one line per object ("ok FILE KIND NAME") or the errors; exit 1 on any error.
import { readFileSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import path from "node:path";
import { pathToFileURL } from "node:url";

const [workDir, ...files] = process.argv.slice(2);
const require = createRequire(path.join(workDir, "package.json"));
const { parseAllDocuments } = await import(require.resolve("yaml"));
const ts = require("typescript");

let failures = 0;
const literals = [];
for (const file of files) {
  const docs = parseAllDocuments(readFileSync(file, "utf8"));
  for (const doc of docs) {
    if (doc.errors.length > 0) {
      console.log(`FAIL ${file}: YAML: ${doc.errors.map((e) => e.message).join("; ")}`);
      failures++;
      continue;
    }
    const object = doc.toJS();
    if (object === null) continue;
    const where = `${file} ${object.kind} ${object.metadata?.name ?? "?"}`;
    if (typeof object.apiVersion !== "string" || typeof object.kind !== "string") {
      console.log(`FAIL ${where}: no apiVersion or kind`);
      failures++;
      continue;
    }
    const module = `kubernetes-models/${object.apiVersion}/${object.kind}`;
    let Model;
    try {
      const file = path.join(workDir, "node_modules", `${module}.js`);
      Model = (await import(pathToFileURL(file).href))[object.kind];
      if (typeof Model !== "function") throw new Error("no model");
    } catch {
      console.log(`FAIL ${where}: no schema for ${object.apiVersion} ${object.kind}`);
      failures++;
      continue;
    }
    try {
      new Model(object).validate();
    } catch (error) {
      console.log(`FAIL ${where}: ${error.message}`);
      failures++;
      continue;
    }
    literals.push({ where, module, kind: object.kind, object });
  }
}

// Pass 2: one TypeScript file, one typed constant per object.
const source = [];
literals.forEach(({ module, kind, object }, i) => {
  source.push(`import type { I${kind} as T${i} } from "${module}";`);
  source.push(`export const object${i}: T${i} = ${JSON.stringify(object, null, 2)};`);
});
const tsFile = path.join(workDir, "manifests.ts");
writeFileSync(tsFile, source.join("\n") + "\n");
const program = ts.createProgram([tsFile], {
  noEmit: true,
  strict: true,
  skipLibCheck: true,
  target: ts.ScriptTarget.ES2022,
  module: ts.ModuleKind.ESNext,
  moduleResolution: ts.ModuleResolutionKind.Bundler,
  types: [],
});
const diagnostics = ts.getPreEmitDiagnostics(program);
const failed = new Set();
for (const d of diagnostics) {
  const text = ts.flattenDiagnosticMessageText(d.messageText, " ");
  let where = tsFile;
  if (d.file && d.start !== undefined) {
    const line = d.file.getLineAndCharacterOfPosition(d.start).line;
    // Which object: the last "export const objectN" at or above the line.
    const lines = d.file.text.split("\n").slice(0, line + 1);
    const at = lines.map((l) => /^export const object(\d+)/.exec(l)).filter(Boolean).pop();
    if (at) {
      where = literals[Number(at[1])].where;
      failed.add(Number(at[1]));
    }
  }
  console.log(`FAIL ${where}: ${text}`);
  failures++;
}
literals.forEach(({ where }, i) => {
  if (!failed.has(i)) console.log(`ok ${where}`);
});
console.log(`${literals.length} objects, ${failures} errors`);
process.exit(failures > 0 ? 1 : 0);
