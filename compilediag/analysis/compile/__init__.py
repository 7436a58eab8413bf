"""What torch compiled, why it broke the graph, and what the compile cost: the
graphs and their compile time (`graphs`), graph breaks read, placed and advised
(`breaks`, checked against torch's explain in `crosscheck`), a compile that died in
Dynamo's own code (`torch_bugs`), the generated kernels and the lines they came from
(`kernels`, `kernel_origins`), explain's timings of the compiled call (`timings`), and
what cuts the compile time (`time_advice`).
"""
