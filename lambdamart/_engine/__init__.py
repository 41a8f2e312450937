"""The training and prediction engine: numba kernels over numpy arrays, one module per stage.

Data flows one way through the stages of a fit, each module importing only those before it:

1. :mod:`.binning`: raw features to uint8 bin codes, thresholds from quantiles of a sample;
2. :mod:`.histogram`: the histogram layout of the codes and the per-node λ/w/count histograms;
3. :mod:`.split`: the best split of a node from its histogram;
4. :mod:`.grower`: one tree grown leaf-wise from those steps (callable one by one as well), :mod:`.symmetric`: one
   grown level by level with a split shared by each level, and :mod:`.stepwise`: both growths driven from Python
   over rows held anywhere (shards whose histograms add up);
5. :mod:`.tree`: grown trees as the fitted model's node arrays (raw thresholds);
6. :mod:`.predict`: scoring rows with the model;
7. :mod:`.contributions`: each feature's share of a row's score (path-dependent TreeSHAP).

Nothing here knows about queries, objectives or the estimator; see ``docs/design.md`` for the whole picture.
"""
