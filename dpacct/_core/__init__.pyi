# Stubs for the compiled module dpacct._core (built from cpp/bindings.cpp), kept by
# hand. This folder holds only .pyi files, so at run time `import dpacct._core`
# still loads the extension module beside it.
from . import ablq as ablq
from . import fdp as fdp
from . import gaussian as gaussian
from . import pld as pld
from . import rdp as rdp
