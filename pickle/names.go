package pickle

import "math/big"

// KeyName renders a dict key the way tensor and object names show it:
// Python's str(key) ("3", "True", "None", "1.5", "(1, 'a')", "b'raw'").
func KeyName(k any) string {
	if s, ok := k.(string); ok {
		return s
	}
	return Repr(k)
}

// TypeName names the Python type of a value of the object tree, for
// reports: "int", "str", "OrderedDict", "argparse.Namespace", ...
func TypeName(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case int64, *big.Int:
		return "int"
	case float64:
		return "float"
	case complex128:
		return "complex"
	case string:
		return "str"
	case []byte:
		return "bytes"
	case Device:
		return "torch.device"
	case Global:
		return x.Module + "." + x.Name
	case *Dict:
		if x.Class != "" {
			return x.Class
		}
		return "dict"
	case *List:
		return "list"
	case *Tuple:
		return "tuple"
	case *Set:
		if x.Frozen {
			return "frozenset"
		}
		return "set"
	case *Tensor:
		return "tensor"
	case *Object:
		return x.Module + "." + x.Name
	case *Foreign:
		return x.Module + "." + x.Name
	case *StorageRef:
		return "torch.storage.TypedStorage"
	}
	return "unknown"
}
