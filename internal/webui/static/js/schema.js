// A JSON Schema check of edited tool arguments, in the browser, before they
// are sent. It covers the keywords tool schemas use (type, properties,
// required, additionalProperties, enum, const, items, bounds on numbers,
// strings and arrays, pattern, allOf/anyOf/oneOf, $ref into $defs) and
// ignores the others: the server validates the arguments against the full
// schema when it records the approval, and its 400 names the field. Paths
// are written as the server writes them: arguments.to, arguments.items[2].

function typeOf(v) {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v; // string, boolean, object
}

function typeMatches(want, v) {
  const got = typeOf(v);
  if (want === got) return true;
  return want === 'number' && got === 'integer';
}

function equal(a, b) {
  return JSON.stringify(canonical(a)) === JSON.stringify(canonical(b));
}

function canonical(v) {
  if (Array.isArray(v)) return v.map(canonical);
  if (v && typeof v === 'object') {
    const out = {};
    for (const k of Object.keys(v).sort()) out[k] = canonical(v[k]);
    return out;
  }
  return v;
}

function resolve(schema, root) {
  let s = schema;
  for (let depth = 0; s && typeof s === 'object' && typeof s.$ref === 'string' && depth < 32; depth++) {
    const ref = s.$ref;
    if (!ref.startsWith('#/')) return {};
    let t = root;
    for (const part of ref.slice(2).split('/')) {
      t = t && t[part.replace(/~1/g, '/').replace(/~0/g, '~')];
    }
    s = t || {};
  }
  return s;
}

function joinKey(path, key) {
  return /^[A-Za-z_][A-Za-z0-9_]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`;
}

function check(schema, v, path, root, errs) {
  const sch = resolve(schema, root);
  if (sch === true || sch === undefined || sch === null) return;
  if (sch === false) {
    errs.push({ path, message: 'is not allowed' });
    return;
  }
  if (typeof sch !== 'object') return;

  if (sch.type !== undefined) {
    const types = Array.isArray(sch.type) ? sch.type : [sch.type];
    if (!types.some((t) => typeMatches(t, v))) {
      errs.push({ path, message: `must be ${types.join(' or ')}, got ${typeOf(v)}` });
      return;
    }
  }
  if (sch.enum && !sch.enum.some((e) => equal(e, v))) {
    errs.push({ path, message: `must be one of ${sch.enum.map((e) => JSON.stringify(e)).join(', ')}` });
  }
  if ('const' in sch && !equal(sch.const, v)) {
    errs.push({ path, message: `must be ${JSON.stringify(sch.const)}` });
  }

  const t = typeOf(v);
  if (t === 'string') {
    const n = [...v].length;
    if (typeof sch.minLength === 'number' && n < sch.minLength) errs.push({ path, message: `must be at least ${sch.minLength} characters` });
    if (typeof sch.maxLength === 'number' && n > sch.maxLength) errs.push({ path, message: `must be at most ${sch.maxLength} characters` });
    if (typeof sch.pattern === 'string') {
      let re = null;
      try {
        re = new RegExp(sch.pattern, 'u');
      } catch {
        // A pattern this browser cannot compile is left to the server.
      }
      if (re && !re.test(v)) errs.push({ path, message: `must match ${sch.pattern}` });
    }
  }
  if (t === 'number' || t === 'integer') {
    if (typeof sch.minimum === 'number' && v < sch.minimum) errs.push({ path, message: `must be >= ${sch.minimum}` });
    if (typeof sch.maximum === 'number' && v > sch.maximum) errs.push({ path, message: `must be <= ${sch.maximum}` });
    if (typeof sch.exclusiveMinimum === 'number' && v <= sch.exclusiveMinimum) errs.push({ path, message: `must be > ${sch.exclusiveMinimum}` });
    if (typeof sch.exclusiveMaximum === 'number' && v >= sch.exclusiveMaximum) errs.push({ path, message: `must be < ${sch.exclusiveMaximum}` });
    if (typeof sch.multipleOf === 'number' && sch.multipleOf > 0) {
      const q = v / sch.multipleOf;
      if (Math.abs(q - Math.round(q)) > 1e-9) errs.push({ path, message: `must be a multiple of ${sch.multipleOf}` });
    }
  }
  if (t === 'array') {
    if (typeof sch.minItems === 'number' && v.length < sch.minItems) errs.push({ path, message: `must have at least ${sch.minItems} items` });
    if (typeof sch.maxItems === 'number' && v.length > sch.maxItems) errs.push({ path, message: `must have at most ${sch.maxItems} items` });
    if (sch.uniqueItems === true) {
      const seen = new Set();
      for (const item of v) {
        const k = JSON.stringify(canonical(item));
        if (seen.has(k)) {
          errs.push({ path, message: 'must not repeat items' });
          break;
        }
        seen.add(k);
      }
    }
    const prefix = Array.isArray(sch.prefixItems) ? sch.prefixItems : [];
    v.forEach((item, i) => {
      const sub = i < prefix.length ? prefix[i] : sch.items;
      if (sub !== undefined) check(sub, item, `${path}[${i}]`, root, errs);
    });
  }
  if (t === 'object') {
    const props = sch.properties || {};
    for (const req of sch.required || []) {
      if (!(req in v)) errs.push({ path: joinKey(path, req), message: 'is required' });
    }
    for (const [k, item] of Object.entries(v)) {
      const p = joinKey(path, k);
      if (k in props) {
        check(props[k], item, p, root, errs);
        continue;
      }
      let matched = false;
      for (const [pat, sub] of Object.entries(sch.patternProperties || {})) {
        let re = null;
        try {
          re = new RegExp(pat, 'u');
        } catch {
          continue;
        }
        if (re.test(k)) {
          matched = true;
          check(sub, item, p, root, errs);
        }
      }
      if (matched) continue;
      if (sch.additionalProperties === false) errs.push({ path: p, message: 'is not an allowed field' });
      else if (sch.additionalProperties && typeof sch.additionalProperties === 'object') {
        check(sch.additionalProperties, item, p, root, errs);
      }
    }
    const n = Object.keys(v).length;
    if (typeof sch.minProperties === 'number' && n < sch.minProperties) errs.push({ path, message: `must have at least ${sch.minProperties} fields` });
    if (typeof sch.maxProperties === 'number' && n > sch.maxProperties) errs.push({ path, message: `must have at most ${sch.maxProperties} fields` });
  }

  for (const sub of sch.allOf || []) check(sub, v, path, root, errs);
  if (Array.isArray(sch.anyOf) && sch.anyOf.length) {
    if (!sch.anyOf.some((sub) => validate(sub, v, path, root).length === 0)) {
      errs.push({ path, message: 'must match at least one of the allowed shapes (anyOf)' });
    }
  }
  if (Array.isArray(sch.oneOf) && sch.oneOf.length) {
    const n = sch.oneOf.filter((sub) => validate(sub, v, path, root).length === 0).length;
    if (n !== 1) errs.push({ path, message: `must match exactly one of the allowed shapes (oneOf), matches ${n}` });
  }
  if (sch.not !== undefined && validate(sch.not, v, path, root).length === 0) {
    errs.push({ path, message: 'matches a shape that is not allowed (not)' });
  }
}

// validate returns the errors of value against schema, [] when it fits:
// [{path, message}], path rooted at base (default "arguments").
export function validate(schema, value, base = 'arguments', root = schema) {
  const errs = [];
  check(schema, value, base, root, errs);
  return errs;
}

// parseJSON parses text, returning {value} or {error} with the position.
export function parseJSON(text) {
  try {
    return { value: JSON.parse(text) };
  } catch (e) {
    return { error: `not valid JSON: ${e.message}` };
  }
}
