"""The names under which torch and the standard-library modules a solution may import hold containers: what any cell
may fill, and any answer may read back through whatever reaches the holder.

Why a list of names: the source rules resolve an attribute chain that starts at a module name
(``torch.nn.functional.tf32_notes``), but not one that starts at a call or an object (``Normal(0.0, 1.0).arg_constraints``,
a module a function hands out); reading an attribute of one of these names, through anything, makes an answer read
everything the notebook defines (rounds 128 to 130). None of them is an attribute of a tensor, a module, an optimizer, a
dict or a list. ``tests/test_autograde_guard.py`` (``test_every_container_a_library_holds_is_named``) reads torch and
those modules again, sources and imported objects, and names any new one.
"""

#: Public names that a module or a class body of theirs binds to a dict, a list or a set.
LIBRARY_CONTAINERS = frozenset(
    {
        "BENCHMARKS", "BENCHMARK_MAP", "BENCHMARK_NAMES", "BINARY_FUNCTIONS", "BINARY_NAMES", "C10_MAPPINGS",
        "CAFFE2_PATH_MAPPINGS", "CAFFE2_SPECIFIC_MAPPINGS", "CALLABLE_NODE_OPS", "COLLECTIVES",
        "COMMON_HIPCC_FLAGS", "COMMON_HIP_FLAGS", "COMMON_MSVC_FLAGS", "COMMON_NVCC_FLAGS", "COMMON_PATTERNS",
        "CONDA_PATTERNS", "CUDA_CLANG_VERSIONS", "CUDA_GCC_VERSIONS", "CUDA_IDENTIFIER_MAP", "CUDA_INCLUDE_MAP",
        "CUDA_SPECIAL_MAP", "CUDA_TO_HIP_MAPPINGS", "CUDA_TYPE_NAME_MAP", "CUDNN_TENSOR_DTYPES", "CXX_FLAGS",
        "DATACLASS_MAGIC_METHODS", "DATAPIPES_OPS", "DEFAULT_DYNAMIC_QUANT_MODULE_MAPPINGS",
        "DEFAULT_DYNAMIC_SPARSE_QUANT_MODULE_MAPPINGS", "DEFAULT_FLAGS",
        "DEFAULT_FLOAT_TO_QUANTIZED_OPERATOR_MAPPINGS", "DEFAULT_MODULE_TO_ACT_POST_PROCESS",
        "DEFAULT_QAT_MODULE_MAPPINGS", "DEFAULT_REFERENCE_STATIC_QUANT_MODULE_MAPPINGS",
        "DEFAULT_STATIC_QUANT_MODULE_MAPPINGS", "DEFAULT_STATIC_SPARSE_QUANT_MODULE_MAPPINGS", "DEVICE_NAMES",
        "DEVICE_REQUIREMENT", "EMPTY_ARG_DICT", "EXCLUDED_ATTRIBUTES", "EXTERN_IMPORT_COMPAT_NAME_MAPPING",
        "EXTRA_INCLUDE_PATHS", "GRID_SAMPLE_INTERPOLATION_MODES", "GRID_SAMPLE_PADDING_MODES",
        "HIPIFY_FINAL_RESULT", "IMPLICIT_IMPORT_ALLOWLIST", "INPLACE_BINARY_NAMES", "INPLACE_UNARY_NAMES",
        "KEYS_NOT_IN_STATE_DICT", "MATH_TRANSPILATIONS", "METHOD_TO_OPERATOR", "MSVC_IGNORE_CUDAFE_WARNINGS",
        "NATIVE_BINARY_FNS", "NATIVE_BINARY_MAP", "NATIVE_INPLACE_BINARY_FNS", "NATIVE_INPLACE_BINARY_MAP",
        "NATIVE_INPLACE_UNARY_FNS", "NATIVE_INPLACE_UNARY_MAP", "NATIVE_REDUCE_FNS", "NATIVE_REDUCE_MAP",
        "NATIVE_UNARY_FNS", "NATIVE_UNARY_MAP", "NON_OBSERVABLE_ARG_DICT", "NON_QUANTIZABLE_WEIGHT_OPS",
        "NVIDIA_PATTERNS", "ONEAPI_PATTERNS", "OPERATOR_HANDLES", "P2P", "PASSTHROUGH_FNS", "PIP_PATTERNS",
        "PLAT_TO_VCVARS", "PRESERVED_ATEN_CIA_OPS", "PYTORCH_MAP", "PYTORCH_RELEASES_CODE_CC",
        "PYTORCH_SPECIFIC_MAPPINGS", "PYTORCH_TEMPLATE_MAP", "REDUCE_NAMES", "REGULAR_SIZES", "SAC_IGNORED_OPS",
        "SUPPORTED_MODULES", "SUPPORTED_NODES", "SUPPORTED_QDTYPES", "SYMPY_INTERP", "TENSOR_REDUCE_FNS",
        "TENSOR_REDUCE_MAP", "TORCH_REDUCE_FNS", "TORCH_REDUCE_MAP", "UNARY_NAMES", "UNARY_NAMES_UNSUPPORTED",
        "UNIMPLEMENTED_ATTR", "UNTRACABLE_DATAFRAME_PIPES", "all_return_types", "also_bool_magic_methods",
        "always_bool_magic_methods", "always_float_magic_methods", "always_int_magic_methods",
        "arg_constraints", "augassign_map", "backend_capability", "backend_list", "backend_type_map",
        "binary_magic_method_remap", "binary_op_dtype_configs", "binop_map", "bitwise_ops",
        "bool_becomes_int_magic_methods", "bool_magic_methods", "boolean_dispatched", "boolop_map", "cache",
        "cache_bypasses", "cmpop_map", "common_args", "common_notes", "conv_dtype_configs", "convolution_notes",
        "current_meta", "customized_loss_ops", "default_assumptions", "default_device_backend_map",
        "default_op_dtype_configs", "dispatch", "dtype_abbrs", "embedding_op_dtype_configs", "env",
        "factory_common_args", "fixed_qparams_op_dtype_configs", "flop_registry", "func_list",
        "functional_optim_map", "functions", "global_namespace", "imagespecs", "inplace_methods", "inplace_ops",
        "iterDP_deprecated_files", "iterDP_files_to_exclude", "iterDP_method_to_special_output_type", "kwargs",
        "layer_norm_op_dtype_configs", "lift_fns", "linear_dtype_configs", "loaded_libraries", "magic_methods",
        "magic_methods_on_operator_with_trailing_underscore", "manual_meta_overrides", "mapDP_deprecated_files",
        "mapDP_files_to_exclude", "mapDP_method_to_special_output_type", "method_list", "mkldnn_map",
        "mkldnn_supported", "mkldnn_supported_unknown", "module_fetch_book", "module_type_list",
        "multi_dim_common", "namespace", "node_start_tokens", "node_to_latency_mapping",
        "node_to_partition_mapping", "only_bool_magic_methods", "only_float_magic_methods", "ops_table",
        "partition_to_logical_device_mapping", "pretty_node_names", "rand_ops", "reflectable_magic_methods",
        "reproducibility_notes", "rnn_op_dtype_configs", "session_streams", "share_qparams_op_dtype_configs",
        "shared_cache", "sizes_strides_methods", "sparse_support_notes", "suffixes", "tf32_notes", "types",
        "unary_magic_methods", "unary_methods", "unary_nonmagic_methods", "unop_map", "window_common_args",
    }
)
