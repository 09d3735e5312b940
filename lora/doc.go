// Package lora merges PEFT LoRA adapters into a base checkpoint's
// weights, as PEFT's merge_and_unload does, one tensor at a time.
//
// ParseConfig reads an adapter_config.json; NewAdapter pairs it with the
// adapter's tensors (adapter_model.safetensors or adapter_model.bin, opened
// by statedict like any checkpoint, never executed) and maps PEFT's names
// to the base's; Plan checks every adapter against the base before
// anything is read or written and returns a Merger, which adds each
// module's delta when convert hands it the base tensor's values
// (convert.TensorTransform), or, for plain LoRA weights, merges blocks of
// rows as they stream from input to output (RowCols, MergeRows:
// convert.RowTransform). The rules, and where they follow PEFT's code,
// are in docs/merge.md.
//
// The PEFT source the semantics follow (huggingface/peft, commit
// 5d602fdbff04c33c1c4de55cda9d4ae1d7cb7e40):
//   - scaling = lora_alpha/r, or lora_alpha/sqrt(r) with use_rslora:
//     LoraLayer.update_layer in src/peft/tuners/lora/layer.py;
//   - the delta: transpose(B @ A, fan_in_fan_out) * scaling
//     (Linear.get_delta_weight), and (B @ A).T * scaling for embeddings
//     (Embedding.get_delta_weight, lora_embedding_A/B);
//   - DoRA: W' = m / ||W + delta|| * (W + delta), the norm taken per output
//     feature (DoraLinearLayer.get_weight_norm in dora.py,
//     DoraLinearVariant.merge_safe in variants.py), per embedding dimension
//     for embeddings (DoraEmbeddingVariant);
//   - lora_bias: bias += lora_B.bias * scaling (Linear.merge);
//   - rank_pattern and alpha_pattern: get_pattern_key in
//     src/peft/utils/other.py, the regular expression (.*\.)?(KEY)$ matched
//     from the start of the module's name, the first key in the file's
//     order that matches winning;
//   - target_modules, exclude_modules, layers_to_transform:
//     check_target_module_exists in src/peft/tuners/tuners_utils.py;
//   - the saved names (base_model.model. prefix, adapter name removed,
//     lora_magnitude_vector without .weight): get_peft_model_state_dict
//     in src/peft/utils/save_and_load.py and LoraModel._get_adapter_state_dict.
package lora
